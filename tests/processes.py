"""Real processes for fault tests: a django-q2 cluster working on the test
database, a TCP proxy that can cut a server away and bring it back, and a
Redis of the test's own that it kills and starts again; and a web process in
miniature that listens on the embedded channel layer."""

import contextlib
import json
import os
import queue
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.db import connection

from tests import waits

ROOT = Path(__file__).resolve().parents[1]
# A file to which each portal and browser a test starts adds a line (benchmarks/suite.py counts them).
STARTS_LOG = "ARTIFACTFLOW_TEST_STARTS_LOG"


def start_record(what: str) -> None:
    """Adds "what test" to the file STARTS_LOG names, if it names one."""
    path = os.environ.get(STARTS_LOG)
    if path:
        # One short write in append mode: lines from the xdist workers do not interleave.
        with open(path, "a") as log:
            log.write(f"{what} {os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0]}\n")


def database_url(*, port: int | None = None) -> str:
    """The test database as DATABASE_URL, optionally through another port (a proxy)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{port or db['PORT'] or 5432}/{db['NAME']}"


class Cluster:
    """`manage.py qcluster` on the test database, in a session of its own so a
    test can SIGKILL all of it. `env` adds to (or overrides) the environment."""

    def __init__(self, *, model_url: str, model: str, log: Path, env: dict | None = None, database: str | None = None):
        self.log = log
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": database or database_url(),
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": model_url,
            "ARTIFACTFLOW_MODEL": model,
            "ARTIFACTFLOW_MODEL_TIMEOUT": str(waits.seconds(10)),
            "ARTIFACTFLOW_WORKERS": "1",
            # tests.settings lowers it for the tests that fail writes for good; these
            # workers ride out real outages, with production's default.
            "ARTIFACTFLOW_DB_RETRY_SECONDS": "30",
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> "Cluster":
        with open(self.log, "a") as out:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def kill(self) -> None:
        """SIGKILL the whole cluster, as a power cut or the OOM killer would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class TcpProxy:
    """Forwards a local port to `target`. `cut()` drops every connection and
    refuses new ones until `restore()`: the server seems to be gone."""

    def __init__(self, *, target: tuple[str, int]):
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._up = True
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._up = False
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def restore(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                up = self._up
            if not up:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()

    def _pipe(self, client: socket.socket, server: socket.socket) -> None:
        peers = {client: server, server: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        data = key.fileobj.recv(65536)
                        if not data:
                            raise OSError("closed")
                        peers[key.fileobj].sendall(data)
            except (OSError, ValueError):
                for sock in peers:
                    sock.close()


REDIS_SERVER = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class DisposableRedis:
    """A redis-server on a spare loopback port that keeps nothing: killed and
    started again on the same port, it comes back empty, as a Redis without
    persistence does after a crash."""

    def __init__(self, *, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "DisposableRedis":
        assert REDIS_SERVER, "redis-server is not installed"
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + waits.seconds(10)
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye to its clients."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False


# Prints each message it receives, one JSON line each.
_LAYER_LISTENER = """
import asyncio, json, sys
from live.layer import LocalSocketLayer

async def main():
    layer = LocalSocketLayer(directory=sys.argv[1], capacity=1000)
    channel = await layer.new_channel()
    await layer.group_add(sys.argv[2], channel)
    print("ready", flush=True)
    while True:
        print(json.dumps(await layer.receive(channel), ensure_ascii=False), flush=True)

asyncio.run(main())
"""


class LayerListener:
    """A web process in miniature on live.layer: joins `group` in `directory` and
    hands over each message it receives (`next`)."""

    def __init__(self, directory: Path, group: str = "conversation-1"):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LAYER_LISTENER, str(directory), group],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert self.process.stdout.readline().strip() == "ready"
        self.path = directory / f"{self.process.pid}.sock"
        # Read as it prints, so that a full pipe never stops it receiving.
        self.received = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.received.put(json.loads(line))

    def next(self) -> dict:
        """The next message it received."""
        return self.received.get(timeout=waits.seconds(10))

    def kill(self):
        self.process.kill()
        self.process.wait()
