"""Browser end-to-end harness: the real topology in separate processes.

daphne and a django-q2 worker run as subprocesses on a fresh database (a new
Postgres database when DATABASE_URL names one, else a SQLite file), and the
worker talks to a scripted model server running in this test process. Tests
drive them with headless Chromium through sync Playwright.
"""

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from playwright.sync_api import sync_playwright

from tests.model_server import ScriptedModelServer
from tests.processes import start_record

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
VENV_BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_TIMEOUT = 30.0


@dataclass(frozen=True)
class User:
    username: str
    password: str


@dataclass
class Portal:
    base_url: str
    users: list[User]
    model_server: ScriptedModelServer
    logs: dict[str, Path]
    env: dict

    def shell(self, code: str) -> str:
        """Runs Python in `manage.py shell` on the portal's database; returns what it printed."""
        result = subprocess.run(
            [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if result.returncode:
            raise RuntimeError(f"manage.py shell failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def user_create(self, *, prefix: str) -> User:
        """A user of the test's own: the portal is shared by the session's tests, and
        this user's list and shares show nothing another test left."""
        user = User(f"{prefix}-{secrets.token_hex(4)}", secrets.token_urlsafe(12))
        self.shell(
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_user(username={user.username!r}, password={user.password!r})"
        )
        return user

    def log_tails(self, *, lines: int = 40) -> str:
        return "\n".join(
            f"--- {name} ({path}) ---\n{_tail(path=path, lines=lines)}" for name, path in self.logs.items()
        )


def _tail(*, path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _postgres_database(*, url: str, name: str, create: bool) -> None:
    # CREATE/DROP DATABASE cannot run in a transaction, and not connected to
    # the database itself: connect to the server's `postgres` database.
    admin_url = urlsplit(url)._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')
        else:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _manage(*args: str, env: dict, log: Path) -> None:
    with open(log, "a") as out:
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    if result.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{_tail(path=log, lines=40)}")


def _start(*, command: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "a") as out:
        # A session of its own, so teardown can kill whatever of it is left.
        return subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(*, process: subprocess.Popen) -> None:
    # SIGTERM to the parent alone: qcluster stops its own worker processes,
    # and signalling them too stalls its shutdown.
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    # Whatever is left of its session, e.g. the workers of a hung cluster.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_for_http(*, url: str, processes: list[subprocess.Popen], portal: Portal) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError(f"a portal process exited during startup\n{portal.log_tails()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {STARTUP_TIMEOUT:.0f} s\n{portal.log_tails()}")


@pytest.fixture(scope="session")
def portal(tmp_path_factory):
    # pytest keeps the last few of these, logs included, for debugging.
    with portal_running(data_dir=tmp_path_factory.mktemp("portal")) as running:
        yield running


@contextlib.contextmanager
def portal_running(*, data_dir: Path, extra_env: dict | None = None):
    """A portal of its own: daphne and a worker on a fresh database in
    `data_dir`, talking to a scripted model server; `extra_env` adds to their environment."""
    server = ScriptedModelServer().start()
    database_url = os.environ.get("DATABASE_URL", "")
    postgres_db = None
    if urlsplit(database_url).scheme in ("postgres", "postgresql"):
        postgres_db = f"{urlsplit(database_url).path.lstrip('/')}_e2e_{secrets.token_hex(4)}"
        _postgres_database(url=database_url, name=postgres_db, create=True)
        database_url = urlsplit(database_url)._replace(path=f"/{postgres_db}").geturl()
    else:
        database_url = f"sqlite:///{data_dir / 'db.sqlite3'}"

    # REDIS_URL, when set, passes through, as the test process's Redis database (one
    # per xdist worker: tests/settings.py): then the Redis channel layer is used.
    env = dict(os.environ)
    if settings.REDIS_URL:
        env["REDIS_URL"] = settings.REDIS_URL
    env.update(
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(40),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        ARTIFACTFLOW_DATA_DIR=str(data_dir),
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="artifactflow.settings",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=server.url,
        ARTIFACTFLOW_MODEL=server.model,
        PYTHONUNBUFFERED="1",
        # As in tests.settings: a test that wants the model's title turns it on.
        ARTIFACTFLOW_MODEL_TITLES="0",
    )
    # Last, so a test may change any of them (an empty OPENAI_API_KEY: the demo model answers).
    env.update(extra_env or {})

    port = _free_port()
    users = [User(f"e2e-user-{i}", secrets.token_urlsafe(12)) for i in (1, 2)]
    logs = {name: data_dir / f"{name}.log" for name in ("setup", "daphne", "qcluster")}
    result = Portal(base_url=f"http://127.0.0.1:{port}", users=users, model_server=server, logs=logs, env=env)
    processes = []
    start_record("portal")
    try:
        _manage("migrate", "--noinput", "--verbosity", "0", env=env, log=logs["setup"])
        _manage("collectstatic", "--noinput", "--verbosity", "0", env=env, log=logs["setup"])
        accounts = json.dumps([[u.username, u.password] for u in users])
        create_users = (
            "import json; from django.contrib.auth import get_user_model; "
            f"[get_user_model().objects.create_user(username=n, password=p) for n, p in json.loads({accounts!r})]"
        )
        _manage("shell", "-c", create_users, env=env, log=logs["setup"])
        processes.append(
            _start(
                command=[str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "artifactflow.asgi:application"],
                env=env,
                log=logs["daphne"],
            )
        )
        processes.append(_start(command=[sys.executable, "manage.py", "qcluster"], env=env, log=logs["qcluster"]))
        _wait_for_http(url=f"{result.base_url}/accounts/login/", processes=processes, portal=result)
        yield result
    finally:
        for process in processes:
            _stop(process=process)
        server.stop()
        if postgres_db:
            _postgres_database(url=os.environ["DATABASE_URL"], name=postgres_db, create=False)


@pytest.fixture
def model_server(portal):
    """The portal's model server with an empty script and request log."""
    portal.model_server.script.clear()
    portal.model_server.requests.clear()
    return portal.model_server


# A module's, not the session's: Playwright's sync API keeps its event loop
# running in this thread while it is open, and under it Django refuses database
# work (SynchronousOnlyOperation) and asyncio.run() refuses to start, so the
# tests of another file that run next in this process (pytest-xdist) would fail.
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing; .ci/run installs it from Debian's chromium package")
        # A developer machine may lack it; CI never skips.
        pytest.skip(f"browser tests need {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        start_record("chromium")
        yield browser
        browser.close()


@pytest.fixture
def new_page(browser):
    """Makes pages in fresh browser contexts (own cookies), one per user."""
    contexts = []

    def make(**options):
        context = browser.new_context(**options)
        context.set_default_timeout(10_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page):
    return new_page()


@pytest.fixture
def screenshot(request):
    """Saves a screenshot named after the test and `name` to test-artifacts/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, *, name: str) -> Path:
        path = SCREENSHOTS / f"{request.node.name}-{name}.png"
        page.screenshot(path=path, full_page=True)
        return path

    return take


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    # A failing test shows what daphne and the worker were saying.
    report = yield
    portal = getattr(item, "funcargs", {}).get("portal")
    if report.failed and portal is not None:
        report.sections.append(("portal logs", portal.log_tails()))
    return report
