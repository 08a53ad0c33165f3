"""What one hostile tab costs everyone else's websockets.

A daphne process serves two users. One user's page watches a running turn:
for each new event the benchmark announces it as a worker would and times
the announcement until the page's websocket receives the token it carries,
a pause past WEBSOCKET_PUSH_INTERVAL between events (so none is coalesced).
It does so alone, then while the other user's socket, from a process of its
own, sends {"running": [100 fresh run ids]} as fast as daphne takes them (the
probe of issue 26, finding 7: another user's updates went from 13 ms to 1.5 s).
The channel layer is live.layer's Unix sockets on SQLite, or Redis when REDIS_URL is set.
"""

import asyncio
import multiprocessing
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from agents.models import Run, RunEvent
from artifactflow import realtime
from conversations import lifecycle

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = 40
SAMPLE_GAP = 0.1
IDS_PER_MESSAGE = 100


class _Websocket:
    """Just enough of RFC 6455 for a page's side of the socket."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, *, port: int, path: str, cookie: str) -> "_Websocket":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: http://localhost:{port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                f"Sec-WebSocket-Key: YmVuY2htYXJrLWZsb29kIQ==\r\nCookie: {cookie}\r\n\r\n"
            ).encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(head.decode(errors="replace"))
        return cls(reader, writer)

    def send(self, payload: bytes, *, opcode: int = 1) -> None:
        # A zero mask leaves the payload as it is: the flood costs its sender nothing.
        size = len(payload)
        if size < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
        elif size < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
        self.writer.write(header + b"\0\0\0\0" + payload)

    async def receive(self) -> str:
        while True:
            first, second = await self.reader.readexactly(2)
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(size)
            opcode = first & 0x0F
            if opcode == 9:
                self.send(payload, opcode=10)
            elif opcode == 8:
                raise ConnectionError("closed by the server")
            elif opcode == 1:
                return payload.decode()


def _flood_process(port: int, path: str, cookie: str, sent, ready) -> None:
    async def flood():
        websocket = await _Websocket.open(port=port, path=path, cookie=cookie)

        async def drain():
            while True:
                await websocket.receive()

        reading = asyncio.create_task(drain())
        ready.set()
        next_id = 10**9
        while not reading.done():
            ids = ",".join(map(str, range(next_id, next_id + IDS_PER_MESSAGE)))
            next_id += IDS_PER_MESSAGE
            websocket.send(f'{{"running":[{ids}]}}'.encode())
            await websocket.writer.drain()
            sent.value += 1

    asyncio.run(flood())


def _watched(username: str):
    """A user's conversation with a running turn, and a signed-in browser's cookie."""
    user = get_user_model().objects.get_or_create(username=username)[0]
    conversation = lifecycle.conversation_start(user=user, content="flood", enqueue=False)
    run = conversation.active_branch.runs.get()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    RunEvent.objects.create(run=run, seq=1, type=RunEvent.Type.METADATA, agent="lead_agent", data={"model": "bench"})
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    return conversation, run, cookie


def _daphne() -> tuple[subprocess.Popen, int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = Path(os.environ["ARTIFACTFLOW_DATA_DIR"]) / "daphne.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "artifactflow.asgi:application"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError(f"daphne did not start: see {log}") from None
            time.sleep(0.1)


async def _latencies(websocket, conversation, run, *, seq: int) -> tuple[list[float], int]:
    layer = get_channel_layer()
    latencies = []
    for _ in range(SAMPLES):
        await asyncio.sleep(SAMPLE_GAP)
        seq += 1
        token = f"tok{seq:05d}"
        await asyncio.to_thread(
            RunEvent.objects.create,
            run=run,
            seq=seq,
            type=RunEvent.Type.LLM_CHUNK,
            agent="lead_agent",
            data={"content": f" {token}"},
        )
        began = time.monotonic()
        await layer.group_send(conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": seq})
        while token not in await websocket.receive():
            pass
        latencies.append((time.monotonic() - began) * 1000)
    return latencies, seq


async def _measure(*, port: int, watched, hostile):
    conversation, run, cookie = watched
    websocket = await _Websocket.open(port=port, path=f"/ws/conversations/{conversation.pk}/", cookie=cookie)
    while "artifacts-changed" not in await websocket.receive():
        pass
    alone, seq = await _latencies(websocket, conversation, run, seq=1)
    fork = multiprocessing.get_context("fork")
    sent, ready = fork.Value("Q", 0, lock=False), fork.Event()
    flooder = fork.Process(
        target=_flood_process, args=(port, f"/ws/conversations/{hostile[0].pk}/", hostile[2], sent, ready)
    )
    flooder.start()
    try:
        await asyncio.to_thread(ready.wait, 30)
        began, sent_before = time.monotonic(), sent.value
        flooded, _ = await _latencies(websocket, conversation, run, seq=seq)
        rate = (sent.value - sent_before) / (time.monotonic() - began)
    finally:
        flooder.kill()
        flooder.join()
        websocket.writer.close()
    return alone, flooded, rate


def _p95(latencies):
    return sorted(latencies)[int(len(latencies) * 0.95) - 1]


def main():
    watched, hostile = _watched("bench-flood-watcher"), _watched("bench-flood-hostile")
    daphne, port = _daphne()
    try:
        alone, flooded, rate = asyncio.run(_measure(port=port, watched=watched, hostile=hostile))
    finally:
        daphne.terminate()
        daphne.wait(10)
    layer = "Redis" if settings.REDIS_URL else "Unix sockets (SQLite)"
    print(f"another user's update → page through daphne, {layer}, {SAMPLES} events each:")
    print(f"  alone:   p50 {statistics.median(alone):7.1f} ms, p95 {_p95(alone):7.1f} ms")
    print(
        f"  flooded: p50 {statistics.median(flooded):7.1f} ms, p95 {_p95(flooded):7.1f} ms "
        f"(one socket sending {rate:,.0f} messages of {IDS_PER_MESSAGE} ids a second)"
    )
    print(
        f"  ratio flooded/alone: p50 {statistics.median(flooded) / statistics.median(alone):.2f}x, "
        f"p95 {_p95(flooded) / _p95(alone):.2f}x"
    )
