"""The documented deployment, run: nginx with deploy/nginx/artifactflow.conf
(only its ports, names and paths replaced) terminating TLS in front of two
daphne and two django-q2 clusters on Postgres and Redis. A browser signs in,
asks, approves and watches the answer stream; mid-turn one daphne and the
worker holding the turn are killed, and the turn still completes.

It needs Postgres and Redis (DATABASE_URL, REDIS_URL), which `.ci/run`'s
second pass provides, and nginx from Debian packages, which `.ci/run`
installs: under CI a missing nginx fails rather than skips."""

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests import waits
from tests.agents.test_engine import call
from tests.answers import long_answer
from tests.e2e.conftest import (
    POOL_ENV,
    SCREENSHOTS,
    STARTUP_TIMEOUT,
    VENV_BIN,
    Portal,
    User,
    _free_port,
    _manage,
    _postgres_database,
    _start,
    _stop,
    screenshot_save,
)
from tests.e2e.test_first_turn import ask, sign_in_with_password
from tests.model_server import ScriptedModelServer, Text

pytestmark = pytest.mark.e2e

SITE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "artifactflow.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
# Long enough for the sweep to find the dead worker (it runs every minute)
# and another to finish the turn.
RECOVERY_TIMEOUT = waits.ms(150)


def _replaced(text: str, pattern: str, new: str, *, flags=0) -> str:
    # Each replacement must hit: a change to the shipped file fails here, not silently.
    result, count = re.subn(pattern, new, text, flags=flags)
    assert count, f"deploy/nginx/artifactflow.conf no longer has {pattern!r}"
    return result


def site_render(
    *, web: list[str], ws: list[str], http_port: int, https_port: int, cert: Path, key: Path, static: Path, root: Path
) -> str:
    """The shipped site with this machine's ports, certificate and paths."""
    text = SITE.read_text()
    text = _replaced(
        text,
        r"upstream artifactflow_web \{.*?\}",
        "upstream artifactflow_web {\n" + "".join(f"    server {s};\n" for s in web) + "}",
        flags=re.S,
    )
    text = _replaced(
        text,
        r"upstream artifactflow_ws \{.*?\}",
        "upstream artifactflow_ws {\n" + "".join(f"    server {s};\n" for s in ws) + "}",
        flags=re.S,
    )
    # No IPv6 in every CI container.
    text = _replaced(text, r"\n\s*listen \[::\]:\d+[^;]*;", "")
    text = _replaced(text, r"listen 80;", f"listen 127.0.0.1:{http_port};")
    text = _replaced(text, r"listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
    text = _replaced(text, r"server_name portal\.example\.com;", "server_name 127.0.0.1;")
    text = _replaced(text, r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};")
    text = _replaced(text, r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};")
    text = _replaced(text, r"alias /srv/artifactflow/data/static/;", f"alias {static}/;")
    return _replaced(text, r"root /var/www/html;", f"root {root};")


def _nginx_conf(*, prefix: Path, site: Path) -> str:
    # The wrapper a distribution's nginx.conf would be, in a directory of the test's own.
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "".join(
        f"    {kind}_temp_path {prefix / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}worker_processes 1;\ndaemon off;\npid {prefix / 'nginx.pid'};\nerror_log {prefix / 'error.log'} info;\n"
        "events { worker_connections 256; }\n"
        f"http {{\n    include /etc/nginx/mime.types;\n    access_log {prefix / 'access.log'};\n{temp}    include {site};\n}}\n"
    )


@pytest.fixture
def nginx_installed():
    # CI installs nginx (.ci/run): there a missing one is a failure, never a skip.
    if not os.path.exists(NGINX):
        message = "nginx is not installed (apt-get install nginx; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def topology_ready(nginx_installed):
    # The test process's Redis database (one per xdist worker: tests/settings.py).
    database_url, redis_url = os.environ.get("DATABASE_URL", ""), settings.REDIS_URL
    if urlsplit(database_url).scheme not in ("postgres", "postgresql") or not redis_url:
        # The embedded default has no server database to scale out on; CI's second pass runs it.
        pytest.skip("the scaled-out topology runs on Postgres and Redis: set DATABASE_URL and REDIS_URL")
    return database_url, redis_url


def _wait_for_listener(*, port: int, processes: dict, portal: Portal) -> None:
    # Plain HTTP to daphne only redirects to HTTPS, so an open port is the sign it is up.
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes.values()):
            raise RuntimeError(f"a process exited during startup\n{portal.log_tails()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listened on {port} within {STARTUP_TIMEOUT:.0f} s\n{portal.log_tails()}")


def _session_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])


def test_the_shipped_nginx_site_is_valid_and_limits_uploads_as_the_app_does(tmp_path, nginx_installed):
    cert, key = _certificate(tmp_path)
    site = tmp_path / "site.conf"
    site.write_text(
        site_render(
            web=["127.0.0.1:9"],
            ws=["127.0.0.1:9"],
            http_port=8080,
            https_port=8443,
            cert=cert,
            key=key,
            static=tmp_path,
            root=tmp_path,
        )
    )
    (tmp_path / "nginx.conf").write_text(_nginx_conf(prefix=tmp_path, site=site))
    checked = subprocess.run(
        [NGINX, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    limit = re.search(r"client_max_body_size (\d+)m;", SITE.read_text())
    allowed = int(limit[1]) * 1024 * 1024
    # Big enough for the largest upload the app takes, and no bigger than it by much.
    assert settings.REQUEST_BODY_MAX_BYTES <= allowed < settings.REQUEST_BODY_MAX_BYTES + 2 * 1024 * 1024


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_two_daphnes_and_two_workers_behind_nginx_survive_losing_one_of_each_mid_turn(
    tmp_path, topology_ready, browser
):
    database_url, redis_url = topology_ready
    server = ScriptedModelServer().start()
    name = f"{urlsplit(database_url).path.lstrip('/')}_deploy_{secrets.token_hex(4)}"
    _postgres_database(url=database_url, name=name, create=True)
    https_port, http_port, port_a, port_b = (_free_port() for _ in range(4))
    base_url = f"https://127.0.0.1:{https_port}"
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "CSRF_TRUSTED_ORIGINS": base_url,
        "DATABASE_URL": urlsplit(database_url)._replace(path=f"/{name}").geturl(),
        "REDIS_URL": redis_url,
        "ARTIFACTFLOW_DATA_DIR": str(tmp_path / "data"),
        "DJANGO_SETTINGS_MODULE": "artifactflow.settings",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": server.url,
        "ARTIFACTFLOW_MODEL": server.model,
        "ARTIFACTFLOW_WORKERS": "1",
        # A killed worker is taken for dead soon, so the sweep resumes its turn in this test's time.
        "ARTIFACTFLOW_HEARTBEAT_STALE": "4",
        "PYTHONUNBUFFERED": "1",
        **POOL_ENV,
    }
    logs = {n: tmp_path / f"{n}.log" for n in ("setup", "daphne-a", "daphne-b", "worker-1", "worker-2", "nginx")}
    user = User("deploy-user", secrets.token_urlsafe(12))
    portal = Portal(
        base_url=base_url,
        users=[user],
        model_server=server,
        logs={**logs, "nginx-error": tmp_path / "error.log"},
        env=env,
    )
    processes: dict[str, subprocess.Popen] = {}
    try:
        _manage("migrate", "--noinput", "--verbosity", "0", env=env, log=logs["setup"])
        _manage("collectstatic", "--noinput", "--verbosity", "0", env=env, log=logs["setup"])
        portal.shell(
            f"from django.contrib.auth import get_user_model; get_user_model().objects.create_user(username={user.username!r}, password={user.password!r})"
        )
        for label, port in (("daphne-a", port_a), ("daphne-b", port_b)):
            command = [
                str(VENV_BIN / "daphne"),
                "--proxy-headers",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "artifactflow.asgi:application",
            ]
            processes[label] = _start(command=command, env=env, log=logs[label])
        for label in ("worker-1", "worker-2"):
            processes[label] = _start(command=[sys.executable, "manage.py", "qcluster"], env=env, log=logs[label])
        cert, key = _certificate(tmp_path)
        site = tmp_path / "site.conf"
        # Websockets to A (B standing by), pages to B (A standing by): one
        # daphne streams while the other serves, and either takes over.
        site.write_text(
            site_render(
                web=[f"127.0.0.1:{port_b}", f"127.0.0.1:{port_a} backup"],
                ws=[f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b} backup"],
                http_port=http_port,
                https_port=https_port,
                cert=cert,
                key=key,
                static=tmp_path / "data" / "static",
                root=tmp_path,
            )
        )
        (tmp_path / "nginx.conf").write_text(_nginx_conf(prefix=tmp_path, site=site))
        processes["nginx"] = _start(
            command=[NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], env=env, log=logs["nginx"]
        )
        for port in (port_a, port_b):
            _wait_for_listener(port=port, processes=processes, portal=portal)

        answer = long_answer(tokens=1200)
        server.add(
            Text(call("call_subagent", agent="crawl_agent", instruction="Read library://1")),
            Text(call("web_fetch", url="library://1")),
            Text("There is no such document."),
            Text(answer, chunk_size=20, delay=0.05),
            # The worker that takes the turn over asks the model again.
            Text(answer, chunk_size=200),
        )
        context = browser.new_context(ignore_https_errors=True, viewport={"width": 1366, "height": 900})
        try:
            page = context.new_page()
            sign_in_with_password(page, base_url=base_url, user=user)
            ask(page, question="What is in the library?")
            prompt = page.locator("form.permission")
            expect(prompt).to_contain_text("web_fetch needs your approval", timeout=waits.ms(30))
            prompt.get_by_role("button", name="Approve").click()

            turn = page.locator("article.turn")
            # By selector: the article is swapped whole as the turn goes on.
            page.wait_for_function(
                "() => { const t = document.querySelector('article.turn');"
                " return t && t.dataset.status === 'running' && t.querySelector('.answer').innerText.length > 200; }",
                timeout=waits.ms(30),
            )
            assert "WSCONNECT" in logs["daphne-a"].read_text() and "WSCONNECT" not in logs["daphne-b"].read_text()
            for request in ("POST /conversations/", "POST /runs/"):
                assert request in logs["daphne-b"].read_text() and request not in logs["daphne-a"].read_text()

            holder = portal.shell("from agents.models import Run; print(Run.objects.get().worker)").strip()
            holder_pid = int(holder.rsplit(":", 1)[1])
            [dead_worker] = [
                label for label in ("worker-1", "worker-2") if _session_of(holder_pid) == processes[label].pid
            ]
            for label in ("daphne-a", dead_worker):
                os.killpg(processes[label].pid, signal.SIGKILL)
                processes.pop(label).wait()

            expect(turn).to_have_attribute("data-status", "completed", timeout=RECOVERY_TIMEOUT)
            # The whole answer, rendered: its last section and its last code, once each.
            shown = turn.locator(".answer")
            expect(shown.locator("h2").last).to_have_text("Section 13")
            expect(shown.locator("h2")).to_have_count(13)
            expect(shown.locator("pre").last).to_contain_text("return 13")
            # The page reconnected through nginx to the daphne left.
            assert "WSCONNECT" in logs["daphne-b"].read_text()
            resumed = portal.shell(
                "from agents.models import Run; r = Run.objects.get(); print(r.status, r.worker_deaths, r.worker, r.message.response.strip() == "
                f"{answer.strip()!r})"
            )
            status, deaths, worker, whole = resumed.split()
            assert (status, deaths, whole) == ("completed", "1", "True") and worker != holder
            screenshot_save(page, path=SCREENSHOTS / "deploy-nginx.png")
        finally:
            context.close()
    except BaseException:
        print(portal.log_tails(lines=60))
        raise
    finally:
        portal.close()
        for process in processes.values():
            _stop(process=process)
        server.stop()
        _postgres_database(url=database_url, name=name, create=False)
