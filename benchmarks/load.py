"""Many people at once, on real processes (issue 31).

N users each ask one question at the same moment through the real HTTP POST
and watch the answer on a websocket of their own, while readers load pages.
The model is a scripted OpenAI-compatible server in this process (or one of
its own with --model-process: at 50 people the figures are the same) streaming
800 tokens at 40 tokens/s; each token is the wall-clock millisecond it was
sent (and its number), so a fragment received on a socket tells how long its
tokens took. The people and the readers run in this process: at 50 users
its own load adds to the latencies it measures.

Setups:
- embedded: one daphne and one `manage.py qcluster` on SQLite (the default,
  ARTIFACTFLOW_WORKERS=2 unless --workers says otherwise);
- pg: a fresh Postgres database (DATABASE_URL names the server) and Redis
  (REDIS_URL), two daphne and two qclusters behind nginx with the shipped
  site (deploy/nginx) over TLS, as tests/deploy/test_nginx.py runs it.

Printed per number of users: first token p50/p95 (ask sent → first answer
fragment on the socket) and the p95 of its part until the model sent that
token (the ask, the turn's start, the model call), token → screen p95 (model sent it → socket received
it), app CPU-seconds per turn (daphne and worker processes, all of their
processes, over the round / turns, the readers' pages included), rows written
per turn (every table: the task queue's and, on SQLite, whatever the channel
layer writes; on Postgres, Redis's commands per turn beside them), database
bytes per turn (its tables and indexes, before any folding) and once the
round's turns are folded as retention folds them (the rows' stored bytes:
indexes left out, but SQLite's full-text index, which is kept in rows, and
Postgres' search vector in the message row; beside it the answers' own
bytes), the worker
processes' peak PSS (all of a cluster's processes), page load p95 while the
answers stream, errors (failed asks, sockets, pages, turns unfinished at the
deadline) and, on pg, the most Postgres connections seen.

Rows written are counted by the database: on SQLite by a trigger per table
that this benchmark adds after migrating (which adds a row write of its own to
each, not counted; FTS5 tables, which take none, are left out: the portal's
own triggers fill them), on Postgres from pg_stat_user_tables once the
processes have reported (PG_STATS_SECONDS after the round).

Not part of benchmarks/run.py: 1, 20 and 50 users take many minutes. Run it alone:

    python benchmarks/load.py --users 1,20,50 --setup embedded
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/5 \\
        python benchmarks/load.py --users 1,20,50 --setup pg
"""

import argparse
import asyncio
import base64
import contextlib
import json
import logging
import math
import multiprocessing
import os
import re
import secrets
import sqlite3
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

TOKENS = 800
TOKENS_PER_SECOND = 40
READERS = 4
READER_PAUSE = 0.5  # seconds between one reader's page loads
# A token is the millisecond it was sent and its place in the answer (two sent in
# the same millisecond by a model catching up on its schedule are still two).
STAMP = re.compile(r"\b(1\d{12})n(\d{4})\b")


def stamped(milliseconds: int, index: int) -> str:
    """Token `index` of an answer, sent at `milliseconds` (STAMP reads it back)."""
    return f"{milliseconds}n{index:04d}"


# The turn's last push: its article in its final state.
ENDED = re.compile(r'class="turn"[^>]*data-status="(?:completed|failed|cancelled)"')
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# On SQLite, where the benchmark's triggers count each table's row writes.
WRITES_TABLE = "benchmark_writes"
# Postgres backends report their row counts at most once a second while
# busy and after 10 s idle; the counts are read after this.
PG_STATS_SECONDS = 12


def stored_bytes(query: Callable[[str], list[tuple]], *, vendor: str) -> tuple[int, int]:
    """The bytes of the rows a database holds, and of the answers within them;
    `query(sql)` returns a statement's rows. SQLite's cell payloads (its
    full-text index is kept in rows, so it counts), Postgres' stored tuples
    (pg_column_size: the message row's search vector counts). Other indexes
    and free space are left out: a few dozen turns cannot fill their pages."""
    if vendor == "sqlite":
        [(size,)] = query(
            "SELECT COALESCE(SUM(d.payload), 0) FROM dbstat AS d JOIN sqlite_schema AS s ON d.name = s.name "
            f"WHERE s.type = 'table' AND d.name NOT LIKE '{WRITES_TABLE}%'"
        )
        [(answers,)] = query("SELECT COALESCE(SUM(LENGTH(CAST(response AS BLOB))), 0) FROM conversations_message")
        return size, answers
    tables = [name for (name,) in query("SELECT relname FROM pg_stat_user_tables")]
    size = sum(query(f'SELECT COALESCE(SUM(pg_column_size(t.*)), 0) FROM "{table}" t')[0][0] for table in tables)
    [(answers,)] = query("SELECT COALESCE(SUM(octet_length(response)), 0) FROM conversations_message")
    return int(size), int(answers)


# --- The model --------------------------------------------------------------------


class _ModelHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._event({"role": "assistant", "content": ""})
            start = time.monotonic()
            for index in range(TOKENS):
                # On a schedule, not a sleep per token, so a slow write does not slow the model.
                delay = start + index / TOKENS_PER_SECOND - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self._event({"content": f"{stamped(time.time_ns() // 1_000_000, index)} "})
            self._event({}, finish_reason="stop")
            self._write(b"data: [DONE]\n\n")
            self._write(b"")
        except ConnectionError:
            pass

    def _event(self, delta, finish_reason=None):
        chunk = {
            "id": "chatcmpl-load",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": "load-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        self._write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

    def _write(self, data: bytes):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class _ModelServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A worker stopped at the end of the run drops its kept-alive connection.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def model_start(*, own_process: bool) -> tuple[str, int, Callable[[], None]]:
    """The model server's address and how to stop it. In a process of its own
    (`--model-process`) its 40 tokens a second for each person do not share this process's
    interpreter with the people's sockets, whose receipt times they would delay."""
    if not own_process:
        server = _ModelServer(("127.0.0.1", 0), _ModelHandler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return *server.server_address[:2], server.shutdown
    parent, child = multiprocessing.get_context("fork").Pipe()
    process = multiprocessing.get_context("fork").Process(target=_model_serve, args=(child,), daemon=True)
    process.start()
    host, port = parent.recv()
    return host, port, process.terminate


def _model_serve(pipe) -> None:
    server = _ModelServer(("127.0.0.1", 0), _ModelHandler)
    server.daemon_threads = True
    pipe.send(server.server_address[:2])
    server.serve_forever()


# --- Processes --------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _manage(*args: str, env: dict) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode:
        raise RuntimeError(f"manage.py {args[0]} failed:\n{result.stderr[:2000]}\n…\n{result.stderr[-2000:]}")
    return result.stdout


class Topology:
    """The portal's processes; each in a session of its own, so its CPU and memory
    are those of every process in the session."""

    def __init__(self, *, setup: str, workers: int, directory: Path, model_url: str):
        self.setup, self.directory = setup, directory
        self.processes: dict[str, subprocess.Popen] = {}
        self.database = None
        self._stats, self._stats_lock = None, threading.Lock()
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "CONN_MAX_AGE")
        }
        self.env.update(
            DEBUG="0",
            SECRET_KEY=secrets.token_urlsafe(50),
            ALLOWED_HOSTS="127.0.0.1",
            ARTIFACTFLOW_DATA_DIR=str(directory / "data"),
            DJANGO_SETTINGS_MODULE="artifactflow.settings",
            OPENAI_API_KEY="sk-load",
            OPENAI_BASE_URL=model_url,
            ARTIFACTFLOW_MODEL="load-model",
            ARTIFACTFLOW_WORKERS=str(workers),
            PYTHONUNBUFFERED="1",
        )
        if setup == "pg":
            server = os.environ.get("DATABASE_URL", "")
            if urlsplit(server).scheme not in ("postgres", "postgresql") or not os.environ.get("REDIS_URL"):
                raise SystemExit("--setup pg needs DATABASE_URL (a Postgres server) and REDIS_URL")
            self.database = f"artifactflow_load_{secrets.token_hex(4)}"
            self.admin_url = urlsplit(server)._replace(path="/postgres").geturl()
            self._postgres(f'CREATE DATABASE "{self.database}"')
            self.env["DATABASE_URL"] = urlsplit(server)._replace(path=f"/{self.database}").geturl()
            self.env["REDIS_URL"] = os.environ["REDIS_URL"]
            # At 50 people the pools hold every connection Postgres allows while
            # the round runs; idle ones go within seconds after it, so that the
            # fold that follows (a process of its own) can connect.
            self.env["ARTIFACTFLOW_DB_POOL_MAX_IDLE"] = "5"

    def writes_count(self) -> tuple[dict[str, int], int, int]:
        """Rows written so far by table, the database's bytes, and Redis's commands (pg)."""
        if self.setup == "embedded":
            with contextlib.closing(sqlite3.connect(self.directory / "data" / "artifactflow.sqlite3")) as db:
                writes = dict(db.execute(f"SELECT tbl, n FROM {WRITES_TABLE}").fetchall())
                [(size,)] = db.execute(
                    f"SELECT SUM(pgsize) FROM dbstat WHERE name NOT LIKE '{WRITES_TABLE}%'"
                ).fetchall()
            return writes, size, 0
        import redis

        time.sleep(PG_STATS_SECONDS)
        rows = self._stats_query(
            "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del, pg_total_relation_size(relid) FROM pg_stat_user_tables"
        )
        stats = redis.Redis.from_url(self.env["REDIS_URL"]).info("commandstats")
        commands = sum(stat["calls"] for name, stat in stats.items() if name not in ("cmdstat_info",))
        return {table: count for table, count, _ in rows}, sum(size for *_, size in rows), commands

    def stored_bytes(self) -> tuple[int, int]:
        """The rows' stored bytes and the answers' within them (stored_bytes)."""
        if self.setup == "embedded":
            with contextlib.closing(sqlite3.connect(self.directory / "data" / "artifactflow.sqlite3")) as db:
                return stored_bytes(lambda sql: db.execute(sql).fetchall(), vendor="sqlite")
        return stored_bytes(self._stats_query, vendor="postgresql")

    def fold(self) -> None:
        """What retention does to a turn a while after it ended (agents.services.retention)."""
        _manage(
            "shell",
            "-c",
            "from datetime import timedelta; from django.utils import timezone; "
            "from agents.services.retention import runs_fold; "
            "runs_fold(finished_before=timezone.now() + timedelta(seconds=1))",
            env=self.env,
        )

    def _writes_counted(self) -> None:
        """A trigger per table and kind of write, counting rows into WRITES_TABLE."""
        with contextlib.closing(sqlite3.connect(self.directory / "data" / "artifactflow.sqlite3")) as db:
            tables = [
                name
                for (name, sql) in db.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'").fetchall()
                if not name.startswith("sqlite_") and "VIRTUAL TABLE" not in sql.upper()
            ]
            virtual = [
                name for (name,) in db.execute("SELECT name FROM sqlite_schema WHERE sql LIKE 'CREATE VIRTUAL%'")
            ]
            tables = [name for name in tables if not any(name.startswith(f"{fts}_") for fts in virtual)]
            db.execute(f"CREATE TABLE {WRITES_TABLE} (tbl TEXT PRIMARY KEY, n INTEGER NOT NULL)")
            for table in tables:
                db.execute(f"INSERT INTO {WRITES_TABLE} VALUES (?, 0)", [table])
                for kind in ("INSERT", "UPDATE", "DELETE"):
                    db.execute(
                        f'CREATE TRIGGER "{WRITES_TABLE}_{table}_{kind}" AFTER {kind} ON "{table}" '
                        f"BEGIN UPDATE {WRITES_TABLE} SET n = n + 1 WHERE tbl = '{table}'; END"
                    )
            db.commit()

    def _postgres(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql)

    def postgres_connections(self) -> int:
        [(count,)] = self._stats_query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return count

    def _stats_query(self, sql: str) -> list[tuple]:
        """On a connection opened before the portal's: at 50 people its pools may hold every other one."""
        import psycopg

        with self._stats_lock:
            if self._stats is None:
                self._stats = psycopg.connect(self.env["DATABASE_URL"], autocommit=True)
            cursor = self._stats.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def _start(self, label: str, command: list[str]) -> None:
        with open(self.directory / f"{label}.log", "a") as out:
            self.processes[label] = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _daphne(self, label: str, port: int, *proxy: str) -> None:
        daphne = str(Path(sys.executable).parent / "daphne")
        self._start(label, [daphne, *proxy, "-b", "127.0.0.1", "-p", str(port), "artifactflow.asgi:application"])

    def start(self) -> str:
        """Starts everything; returns the base URL people use."""
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        if self.setup == "embedded":
            port = _free_port()
            self.base_url = f"http://127.0.0.1:{port}"
            self.env["CSRF_TRUSTED_ORIGINS"] = self.base_url
            _manage("migrate", "--noinput", "--verbosity", "0", env=self.env)
            self._writes_counted()
            self._daphne("daphne", port)
            self._start("worker", [sys.executable, "manage.py", "qcluster"])
            self._wait(port)
            return self.base_url
        https_port, http_port, port_a, port_b = (_free_port() for _ in range(4))
        self.base_url = f"https://127.0.0.1:{https_port}"
        self.env["CSRF_TRUSTED_ORIGINS"] = self.base_url
        _manage("migrate", "--noinput", "--verbosity", "0", env=self.env)
        _manage("collectstatic", "--noinput", "--verbosity", "0", env=self.env)
        self.postgres_connections()
        for label, port in (("daphne-a", port_a), ("daphne-b", port_b)):
            self._daphne(label, port, "--proxy-headers")
        for label in ("worker-1", "worker-2"):
            self._start(label, [sys.executable, "manage.py", "qcluster"])
        self._nginx(http_port=http_port, https_port=https_port, backends=[port_a, port_b])
        for port in (port_a, port_b, https_port):
            self._wait(port)
        return self.base_url

    def _nginx(self, *, http_port: int, https_port: int, backends: list[int]) -> None:
        # The shipped site, rendered as the deployment test renders it (that module needs Django set up).
        os.environ.update(
            {key: self.env[key] for key in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
        )
        import django

        django.setup()
        # Django's logging config would show every request this process makes.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        from tests.deploy.test_nginx import NGINX, _certificate, _nginx_conf, site_render

        cert, key = _certificate(self.directory)
        servers = [f"127.0.0.1:{port}" for port in backends]
        site = self.directory / "site.conf"
        site.write_text(
            site_render(
                web=servers,
                ws=servers,
                http_port=http_port,
                https_port=https_port,
                cert=cert,
                key=key,
                static=self.directory / "data" / "static",
                root=self.directory,
            )
        )
        conf = _nginx_conf(prefix=self.directory, site=site).replace(
            "worker_connections 256;", "worker_connections 4096;"
        )
        (self.directory / "nginx.conf").write_text(conf)
        self._start("nginx", [NGINX, "-p", str(self.directory), "-c", str(self.directory / "nginx.conf")])

    def _wait(self, port: int) -> None:
        import socket

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for label, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{label} exited during startup; see {self.directory}/{label}.log")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return
            time.sleep(0.2)
        raise RuntimeError(f"nothing listened on {port}")

    def sessions(self, *, workers_only: bool = False) -> set[int]:
        return {
            process.pid
            for label, process in self.processes.items()
            if label != "nginx" and (label.startswith("worker") or not workers_only)
        }

    def stop(self) -> None:
        import signal

        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if self.database:
            if self._stats is not None:
                self._stats.close()
            self._postgres(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


# --- What the processes use, from /proc --------------------------------------------


def _session_pids(sessions: set[int]) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[3]) in sessions:
                    pids.append(int(entry))
    return pids


def cpu_seconds(sessions: set[int]) -> dict[int, float]:
    """CPU time per process of these sessions, its reaped children's included."""
    seconds = {}
    for pid in _session_pids(sessions):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name.
            seconds[pid] = sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
    return seconds


def pss_mb(sessions: set[int]) -> float:
    total = 0
    for pid in _session_pids(sessions):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total / 1024


# --- People -------------------------------------------------------------------------


class WebSocket:
    """Just enough of RFC 6455 for a client that reads text frames."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, *, base_url: str, path: str, cookie: str) -> "WebSocket":
        url = urlsplit(base_url)
        context = None
        if url.scheme == "https":
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        reader, writer = await asyncio.open_connection(url.hostname, url.port, ssl=context, limit=2**24)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {base_url}\r\n"
                f"Cookie: {cookie}\r\n\r\n"
            ).encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            writer.close()
            raise ConnectionError(f"websocket refused: {head.splitlines()[0]!r}")
        return cls(reader, writer)

    async def receive(self) -> str | None:
        """The next text message; None once the server closes."""
        parts = []
        while True:
            first, second = await self.reader.readexactly(2)
            length = second & 0x7F
            if length == 126:
                length = int.from_bytes(await self.reader.readexactly(2), "big")
            elif length == 127:
                length = int.from_bytes(await self.reader.readexactly(8), "big")
            payload = await self.reader.readexactly(length)
            opcode = first & 0x0F
            if opcode == 0x8:
                return None
            if opcode == 0x9:
                self._send(0xA, payload)
                continue
            if opcode in (0x0, 0x1):
                parts.append(payload)
                if first & 0x80:
                    return b"".join(parts).decode()

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        self.writer.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._send(0x8, (1000).to_bytes(2, "big"))
            self.writer.close()


async def _ask(*, client: httpx.AsyncClient, base_url: str, cookie: str, number: int, deadline: float) -> dict:
    """One person: asks, opens the conversation's socket, reads until the answer is whole."""
    result = {"first": None, "model_first": None, "latencies": [], "error": None}
    csrf = re.search(r"csrftoken=([^;]+)", cookie)[1]
    asked = time.time()
    try:
        response = await client.post(
            f"{base_url}/conversations/",
            data={"content": f"Question {number}: what is in the library?"},
            headers={"Cookie": cookie, "X-CSRFToken": csrf, "Referer": f"{base_url}/", "Origin": base_url},
        )
        if response.status_code != 302:
            raise RuntimeError(f"ask answered {response.status_code}")
        path = urlsplit(response.headers["location"]).path
        conversation = path.strip("/").split("/")[-1]
        socket = await WebSocket.open(base_url=base_url, path=f"/ws/conversations/{conversation}/", cookie=cookie)
        seen: dict[str, tuple[float, float]] = {}  # token number: (sent, received)
        try:
            while len(seen) < TOKENS:
                message = await asyncio.wait_for(socket.receive(), timeout=max(0.1, deadline - time.monotonic()))
                received = time.time()
                if message is None:
                    raise ConnectionError("the server closed the socket")
                for stamp, index in STAMP.findall(message):
                    if index not in seen:
                        seen[index] = (int(stamp) / 1000, received)
                if ENDED.search(message):
                    break
        finally:
            socket.close()
        if len(seen) < TOKENS:
            raise RuntimeError(f"the turn ended with {len(seen)} of {TOKENS} tokens shown")
        result["first"] = min(received for _, received in seen.values()) - asked
        result["model_first"] = min(sent for sent, _ in seen.values()) - asked
        result["latencies"] = [received - sent for sent, received in seen.values()]
    except TimeoutError:
        result["error"] = "turn unfinished at the deadline"
    except Exception as error:  # every failure is counted and named, none stops the run
        result["error"] = f"{type(error).__name__}: {error}"
    return result


async def _read_pages(*, client, base_url: str, cookie: str, until: asyncio.Event, times: list, errors: list):
    while not until.is_set():
        started = time.monotonic()
        try:
            response = await client.get(f"{base_url}/", headers={"Cookie": cookie})
            if response.status_code != 200:
                errors.append(f"page answered {response.status_code}")
            else:
                times.append(time.monotonic() - started)
        except httpx.HTTPError as error:
            errors.append(f"page: {type(error).__name__}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(until.wait(), READER_PAUSE)


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


async def _round(*, topology: Topology, cookies: list[str], users: int, timeout: float) -> dict:
    limits = httpx.Limits(max_connections=users + READERS + 10)
    async with httpx.AsyncClient(verify=False, timeout=120, limits=limits) as client:
        deadline = time.monotonic() + timeout
        streaming = asyncio.Event()
        page_times, errors = [], []
        readers = [
            asyncio.create_task(
                _read_pages(
                    client=client,
                    base_url=topology.base_url,
                    cookie=cookie,
                    until=streaming,
                    times=page_times,
                    errors=errors,
                )
            )
            for cookie in cookies[:READERS]
        ]
        askers = [
            _ask(client=client, base_url=topology.base_url, cookie=cookie, number=number, deadline=deadline)
            for number, cookie in enumerate(cookies[READERS : READERS + users])
        ]
        results = await asyncio.gather(*askers)
        streaming.set()
        await asyncio.gather(*readers)
    errors += [result["error"] for result in results if result["error"]]
    firsts = [result["first"] for result in results if result["first"] is not None]
    model_firsts = [result["model_first"] for result in results if result["model_first"] is not None]
    latencies = [latency for result in results for latency in result["latencies"]]
    return {
        "firsts": firsts,
        "model_firsts": model_firsts,
        "latencies": latencies,
        "pages": page_times,
        "errors": errors,
    }


def _watch(topology: Topology, stop: threading.Event, peaks: dict) -> None:
    while not stop.wait(1.0):
        peaks["pss"] = max(peaks["pss"], pss_mb(topology.sessions(workers_only=True)))
        if topology.database:
            with contextlib.suppress(Exception):
                peaks["connections"] = max(peaks["connections"], topology.postgres_connections())


def _sign_in(topology: Topology, count: int) -> list[str]:
    """Cookie headers (session and CSRF) of `count` new users."""
    code = (
        "import json; from django.contrib.auth import get_user_model; from django.middleware.csrf import _get_new_csrf_string; "
        "from django.test import Client\n"
        "cookies = []\n"
        f"for number in range({count}):\n"
        "    user = get_user_model().objects.create_user(username=f'load-{number}', password=None)\n"
        "    client = Client(); client.force_login(user)\n"
        "    cookies.append(f\"sessionid={client.cookies['sessionid'].value}; csrftoken={_get_new_csrf_string()}\")\n"
        "print(json.dumps(cookies))"
    )
    return json.loads(_manage("shell", "--no-imports", "-c", code, env=topology.env).strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="1,20,50", help="comma-separated numbers of people asking at once")
    parser.add_argument("--setup", choices=("embedded", "pg"), default="embedded")
    parser.add_argument("--workers", type=int, default=2, help="ARTIFACTFLOW_WORKERS of each cluster")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a round may take")
    parser.add_argument(
        "--model-process", action="store_true", help="run the model server in a process of its own, not this one"
    )
    args = parser.parse_args(argv)
    counts = [int(count) for count in args.users.split(",")]
    host, port, model_stop = model_start(own_process=args.model_process)
    directory = Path(tempfile.mkdtemp(prefix="artifactflow-load-"))
    topology = Topology(
        setup=args.setup, workers=args.workers, directory=directory, model_url=f"http://{host}:{port}/v1"
    )
    rows = []
    try:
        topology.start()
        cookies = _sign_in(topology, READERS + max(counts))
        for users in counts:
            print(f"{users} users asking…", file=sys.stderr, flush=True)
            stop, peaks = threading.Event(), {"pss": 0.0, "connections": 0}
            watcher = threading.Thread(target=_watch, args=(topology, stop, peaks), daemon=True)
            stored_before, answers_before = topology.stored_bytes()
            writes_before, bytes_before, commands_before = topology.writes_count()
            before = cpu_seconds(topology.sessions())
            watcher.start()
            outcome = asyncio.run(_round(topology=topology, cookies=cookies, users=users, timeout=args.timeout))
            stop.set()
            watcher.join()
            after = cpu_seconds(topology.sessions())
            cpu = sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
            writes_after, bytes_after, commands_after = topology.writes_count()
            topology.fold()
            stored_after, answers_after = topology.stored_bytes()
            writes = {
                table: (count - writes_before.get(table, 0)) / users
                for table, count in writes_after.items()
                if count > writes_before.get(table, 0)
            }
            costs = {
                "cpu": cpu / users,
                "writes": writes,
                "bytes": (bytes_after - bytes_before) / users,
                "folded": (stored_after - stored_before) / users,
                "answer": (answers_after - answers_before) / users,
                "commands": (commands_after - commands_before) / users,
            }
            rows.append((users, outcome, costs, peaks))
            for error in sorted(set(outcome["errors"]))[:5]:
                print(f"  {users} users, error: {error}", file=sys.stderr)
    finally:
        topology.stop()
        model_stop()
    print(
        f"{args.setup}, {args.workers} workers per cluster: {TOKENS} tokens at {TOKENS_PER_SECOND}/s per answer, "
        f"{READERS} readers loading a page every {READER_PAUSE}s (logs in {directory})"
    )
    print(
        "| users | first token p50 / p95 | of which until the model sent it, p95 | token → screen p95 | app CPU-s per turn | rows written per turn "
        "| Redis commands per turn | database KB per turn | after folding: KB per turn / of which the answer "
        "| worker PSS MB | page p95 while streaming | errors | max Postgres connections |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for users, outcome, costs, peaks in rows:
        firsts = outcome["firsts"]
        commands = f"{costs['commands']:.0f}" if topology.database else "—"
        print(
            f"| {users} | {statistics.median(firsts) if firsts else math.nan:.2f} s / {_percentile(firsts, 0.95):.2f} s "
            f"| {_percentile(outcome['model_firsts'], 0.95):.2f} s "
            f"| {_percentile(outcome['latencies'], 0.95) * 1000:.0f} ms | {costs['cpu']:.2f} "
            f"| {sum(costs['writes'].values()):.0f} | {commands} "
            f"| {costs['bytes'] / 1024:.0f} | {costs['folded'] / 1024:.1f} / {costs['answer'] / 1024:.1f} "
            f"| {peaks['pss']:.0f} "
            f"| {_percentile(outcome['pages'], 0.95) * 1000:.0f} ms | {len(outcome['errors'])} "
            f"| {peaks['connections'] if topology.database else '—'} |"
        )
    users, _, costs, _ = rows[-1]
    print(f"\nRows written per turn by table, {users} users:")
    for table, count in sorted(costs["writes"].items(), key=lambda item: -item[1]):
        print(f"  {table}: {count:.1f}")


if __name__ == "__main__":
    main()
