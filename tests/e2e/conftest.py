"""Browser end-to-end harness: the real topology in separate processes.

daphne and a django-q2 worker run as subprocesses on a fresh database (a new
Postgres database when DATABASE_URL names one, else a SQLite file), and the
worker talks to a scripted model server running in this test process. Tests
drive them with headless Chromium through sync Playwright, one browser per test
process (tests/browser.py).

Each test process migrates once (portal_template): every portal it starts gets a
copy of that database, users included, and the static files it collected.
"""

import contextlib
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from tests import waits
from tests.e2e.watch import watch_start
from tests.model_server import ScriptedModelServer
from tests.processes import start_record

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
# Set (make screenshots), the states the browser tests name are saved for a
# person to look at. make test saves none: drawing some 430 full-page PNGs no
# one opens took about 8% of its browser tests' CPU time. A failing test's pages
# are saved either way.
SCREENSHOTS_TAKEN = bool(os.environ.get("ARTIFACTFLOW_SCREENSHOTS"))
VENV_BIN = Path(sys.executable).parent
STARTUP_TIMEOUT = waits.seconds(30)
# Playwright's own default for expect(), scaled as every other wait.
expect.set_options(timeout=waits.ms(5))


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
    _shell: subprocess.Popen | None = None
    _shell_lock: threading.Lock = field(default_factory=threading.Lock)

    def shell(self, code: str) -> str:
        """Runs Python on the portal's database, in one long-lived Django process
        (tests/portal_shell.py); returns what it printed."""
        with self._shell_lock:
            if self._shell is None or self._shell.poll() is not None:
                self.shell_start()
            self._shell.stdin.write(json.dumps({"code": code}) + "\n")
            self._shell.stdin.flush()
            line = self._shell.stdout.readline()
        if not line:
            raise RuntimeError("the portal's shell exited")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the portal's shell failed:\n{answer['error'][-3000:]}")
        return answer["out"]

    def shell_start(self) -> None:
        """Starts the shell's process, which then sets Django up while the caller goes on."""
        self._shell = subprocess.Popen(
            [sys.executable, "-m", "tests.portal_shell"],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def close(self) -> None:
        """Ends the shell, if one was started."""
        if self._shell is not None:
            self._shell.stdin.close()
            try:
                self._shell.wait(timeout=waits.seconds(10))
            except subprocess.TimeoutExpired:
                self._shell.kill()
                self._shell.wait()

    def user_create(self, *, prefix: str) -> User:
        """A user of the test's own: the portal is shared by the session's tests, and
        this user's list and shares show nothing another test left."""
        user = User(f"{prefix}-{secrets.token_hex(4)}", secrets.token_urlsafe(12))
        self.shell(
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_user(username={user.username!r}, password={user.password!r})"
        )
        return user

    def session_create(self, *, username: str) -> tuple[str, str]:
        """A new signed-in session of `username`'s, made by django.contrib.auth.login
        (its signals too): (the session cookie's name, its value)."""
        code = (
            "from importlib import import_module; from django.conf import settings; "
            "from django.contrib.auth import get_user_model, login; from django.http import HttpRequest; "
            "request = HttpRequest(); request.session = import_module(settings.SESSION_ENGINE).SessionStore(); "
            f"login(request, get_user_model().objects.get(username={username!r}), "
            "backend='django.contrib.auth.backends.ModelBackend'); "
            "request.session.save(); print(settings.SESSION_COOKIE_NAME, request.session.session_key)"
        )
        name, key = self.shell(code).split()
        return name, key

    def runs_end(self) -> None:
        """Cancels every turn still going, as staff would, and waits until each a
        worker may run has ended: a turn a test left behind must not ask the model
        server for a reply the next test scripted. (A turn a test seeded as running
        has no worker, and never asks.)"""
        active = "from agents.models import Run; active = Run.objects.filter(status__in=Run.ACTIVE_STATUSES); "
        cancel = (
            "from agents.services.runs import runs_cancel_by_staff; "
            "runs_cancel_by_staff(run_ids=list(active.values_list('pk', flat=True))); "
        )
        going = "print(list(active.exclude(status=Run.Status.RUNNING, worker='').values_list('pk', 'status')))"
        if self.shell(active + cancel + going).strip() == "[]":
            return
        # A stream the test held goes on, so its worker reaches its next cancel
        # check; the cancel is made once, then only waited for.
        self.model_server.release()
        waits.until(lambda: self.shell(active + going).strip() == "[]", timeout=30, interval=0.1)

    def log_tails(self, *, lines: int = 40) -> str:
        return "\n".join(
            f"--- {name} ({path}) ---\n{_tail(path=path, lines=lines)}" for name, path in self.logs.items()
        )


@dataclass(frozen=True)
class Template:
    """A migrated database with the two users, and collected static files, for portals to copy."""

    database_url: str
    static: Path
    users: list[User]

    def database_copy(self, *, data_dir: Path) -> tuple[str, str | None]:
        """A new database holding the template's: (its DATABASE_URL, its Postgres name or None)."""
        if urlsplit(self.database_url).scheme in ("postgres", "postgresql"):
            template = urlsplit(self.database_url).path.lstrip("/")
            name = f"{template.removesuffix('_template')}_{secrets.token_hex(4)}"
            _postgres_database(url=self.database_url, name=name, create=True, template=template)
            return urlsplit(self.database_url)._replace(path=f"/{name}").geturl(), name
        path = data_dir / "db.sqlite3"
        # The backup API copies a consistent database, whatever is left in a WAL beside it.
        with contextlib.closing(sqlite3.connect(self.database_url.removeprefix("sqlite:///"))) as source:
            with contextlib.closing(sqlite3.connect(path)) as copy:
                source.backup(copy)
        return f"sqlite:///{path}", None


def _tail(*, path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _postgres_database(*, url: str, name: str, create: bool, template: str | None = None) -> None:
    # CREATE/DROP DATABASE cannot run in a transaction, and not connected to
    # the database itself: connect to the server's `postgres` database.
    admin_url = urlsplit(url)._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if create:
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
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
    # A test's portal keeps nothing, so its whole session is killed at once: a
    # graceful stop of qcluster takes seconds (tests/agents/test_worker.py tests that).
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


# The test machine's Postgres takes 100 connections, shared by every xdist
# worker's portals (its session portal and a module's own, seven processes
# each) and the deployment test's topology at once. With psycopg_pool's
# defaults a portal held what its bursts opened for ten minutes, about 15, and
# CI's last files ran out. Each process here opens at most a few and closes a
# burst's within seconds.
POOL_ENV = {"ARTIFACTFLOW_DB_POOL_MAX_SIZE": "6", "ARTIFACTFLOW_DB_POOL_MAX_IDLE": "5"}


def _environment(*, data_dir: Path, database_url: str, extra_env: dict | None = None) -> dict:
    """A portal process's environment: production settings on `database_url`, `extra_env` last."""
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
        PYTHONUNBUFFERED="1",
        # As in tests.settings: a test that wants the model's title turns it on.
        ARTIFACTFLOW_MODEL_TITLES="0",
        **POOL_ENV,
    )
    env.update(extra_env or {})
    return env


@pytest.fixture(scope="session")
def portal_template(tmp_path_factory):
    """What every portal of this test process starts from: migrated once, in one process."""
    with template_made(directory=tmp_path_factory.mktemp("portal-template")) as template:
        yield template


@contextlib.contextmanager
def template_made(*, directory: Path):
    """A `Template` in `directory` (and on the Postgres of DATABASE_URL, if set), until the block ends."""
    database_url = os.environ.get("DATABASE_URL", "")
    postgres_db = None
    if urlsplit(database_url).scheme in ("postgres", "postgresql"):
        postgres_db = f"{urlsplit(database_url).path.lstrip('/')}_e2e_{secrets.token_hex(4)}_template"
        _postgres_database(url=database_url, name=postgres_db, create=True)
        database_url = urlsplit(database_url)._replace(path=f"/{postgres_db}").geturl()
    else:
        database_url = f"sqlite:///{directory / 'db.sqlite3'}"
    users = [User(f"e2e-user-{i}", secrets.token_urlsafe(12)) for i in (1, 2)]
    accounts = json.dumps([[u.username, u.password] for u in users])
    setup = (
        "import json; from django.core.management import call_command; from django.contrib.auth import get_user_model; "
        "call_command('migrate', interactive=False, verbosity=0); "
        "call_command('collectstatic', interactive=False, verbosity=0); "
        f"[get_user_model().objects.create_user(username=n, password=p) for n, p in json.loads({accounts!r})]"
    )
    start_record("template")
    try:
        _manage(
            "shell",
            "-c",
            setup,
            env=_environment(data_dir=directory, database_url=database_url),
            log=directory / "setup.log",
        )
        yield Template(database_url=database_url, static=directory / "static", users=users)
    finally:
        if postgres_db:
            _postgres_database(url=os.environ["DATABASE_URL"], name=postgres_db, create=False)


@pytest.fixture(scope="session")
def portal(portal_template, tmp_path_factory):
    # pytest keeps the last few of these, logs included, for debugging.
    with portal_running(template=portal_template, data_dir=tmp_path_factory.mktemp("portal")) as running:
        yield running


@contextlib.contextmanager
def portal_running(*, template: Template, data_dir: Path, extra_env: dict | None = None):
    """A portal of its own: daphne and a worker on a copy of the template's
    database, talking to a scripted model server; `extra_env` adds to their environment."""
    server = ScriptedModelServer().start()
    database_url, postgres_db = template.database_copy(data_dir=data_dir)
    # Served from disk (whitenoise, DEBUG off) as collected once for the template.
    (data_dir / "static").symlink_to(template.static, target_is_directory=True)
    env = _environment(
        data_dir=data_dir,
        database_url=database_url,
        # Last, so a test may change any of them (an empty OPENAI_API_KEY: the demo model answers).
        extra_env={
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": server.url,
            "ARTIFACTFLOW_MODEL": server.model,
            **(extra_env or {}),
        },
    )
    port = _free_port()
    logs = {name: data_dir / f"{name}.log" for name in ("daphne", "qcluster")}
    result = Portal(base_url=f"http://127.0.0.1:{port}", users=template.users, model_server=server, logs=logs, env=env)
    processes = []
    start_record("portal")
    try:
        processes.append(
            _start(
                command=[str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "artifactflow.asgi:application"],
                env=env,
                log=logs["daphne"],
            )
        )
        processes.append(_start(command=[sys.executable, "manage.py", "qcluster"], env=env, log=logs["qcluster"]))
        # Every test signs in through it (Portal.session_create): it starts beside the portal.
        result.shell_start()
        _wait_for_http(url=f"{result.base_url}/accounts/login/", processes=processes, portal=result)
        yield result
    finally:
        result.close()
        for process in processes:
            _stop(process=process)
        server.stop()
        if postgres_db:
            _postgres_database(url=os.environ["DATABASE_URL"], name=postgres_db, create=False)


@pytest.fixture
def model_server(portal):
    """The portal's model server with an empty script and request log; what the
    test's turns left going is ended after it."""
    portal.model_server.reset()
    yield portal.model_server
    portal.runs_end()


@pytest.fixture
def new_page(browser, request):
    """Makes pages in fresh browser contexts (own cookies), one per user, each
    watched (tests/e2e/watch.py): a test that passed fails here if what its pages
    showed while they changed broke an invariant."""
    contexts, watches, pages = [], [], []

    def make(**options):
        context = browser.new_context(**options)
        context.set_default_timeout(waits.ms(10))
        contexts.append(context)
        page = context.new_page()
        pages.append(page)
        watches.append(watch_start(page))
        return page

    yield make
    passed = getattr(request.node, "call_passed", False)
    if not passed:
        _failed_pages_saved(pages, name=request.node.name)
    for context in contexts:
        context.close()
    if passed:
        allowed = marker.args if (marker := request.node.get_closest_marker("watch_allows")) else ()
        for watch in watches:
            watch.check(allowed=allowed)


@pytest.fixture
def page(new_page):
    return new_page()


@pytest.fixture
def screenshot(request):
    """Saves a screenshot named after the test and `name` to
    test-artifacts/screenshots/, when screenshots are asked for (SCREENSHOTS_TAKEN)."""

    def take(page, *, name: str, full_page: bool = True) -> Path | None:
        return screenshot_save(page, path=SCREENSHOTS / f"{request.node.name}-{name}.png", full_page=full_page)

    return take


def screenshot_save(page, *, path: Path, full_page: bool = False) -> Path | None:
    """The page drawn to `path`, when screenshots are asked for (SCREENSHOTS_TAKEN)."""
    if not SCREENSHOTS_TAKEN:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=path, full_page=full_page)
    return path


def _failed_pages_saved(pages, *, name: str) -> None:
    """What each page of a failing test showed at its end, beside the portal's logs."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for number, page in enumerate(pages, start=1):
        try:
            page.screenshot(path=SCREENSHOTS / f"{name}-failed-{number}.png", full_page=True, timeout=waits.ms(10))
        except PlaywrightError:
            # A page the test closed, or one too broken to draw: the failure says the rest.
            continue


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    # A failing test shows what daphne and the worker were saying.
    report = yield
    if report.when == "call":
        item.call_passed = report.passed
    portal = getattr(item, "funcargs", {}).get("portal")
    if report.failed and portal is not None:
        report.sections.append(("portal logs", portal.log_tails()))
    return report
