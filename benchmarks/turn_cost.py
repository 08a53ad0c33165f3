"""What one streamed answer costs: an 800-token answer at 40 tokens/s through
the real engine, watched by one tab through the real consumer and channel
layer, with the scripted model in a process of its own (its CPU is not the
app's). Printed: app CPU-seconds (worker and consumer, every thread of this
process), rows the worker wrote (INSERT/UPDATE/DELETE on its connection),
websocket frames, and token sent → shown on the page p50/p95.

Baseline, measured in the same run: a row per 0.05 s and the page woken by
each (RUN_CHUNK_FLUSH_SECONDS=0.05, no text sent live), as before issue 31;
now: a row per RUN_CHUNK_FLUSH_SECONDS and text sent live every RUN_LIVE_SECONDS.

    python benchmarks/turn_cost.py        (also part of `make bench`)
"""

import asyncio
import multiprocessing
import re
import statistics
import threading
import time

if __name__ == "__main__":
    from setup_django import setup

    setup()

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import Client

from agents.services.execution import run_execute
from conversations import lifecycle
from tests.asgi import conversation_socket, session_cookie
from tests.model_server import ScriptedModelServer, Text

TOKENS, TOKENS_PER_SECOND = 800, 40
WORDS = [f"w{i:04d}" for i in range(TOKENS)]


def _model_server(pipe, replies: int) -> None:
    server = ScriptedModelServer().start()
    for _ in range(replies):
        server.add(Text(" ".join(WORDS) + " ", chunk_size=len("w0000 "), delay=1 / TOKENS_PER_SECOND))
    pipe.send(server.url)
    pipe.recv()
    pipe.send(list(server.sent))
    server.stop()


def _turn(url: str, *, flush: float, live: float) -> dict:
    settings.ARTIFACTFLOW_LLM = {
        "api_key": "sk-bench",
        "base_url": url,
        "model": "scripted-model",
        "timeout": 60.0,
        "max_retries": 0,
    }
    settings.RUN_CHUNK_FLUSH_SECONDS, settings.RUN_LIVE_SECONDS = flush, live
    # The model's title would take the scripted server's next reply, the next turn's answer.
    settings.MODEL_TITLES = False
    user = get_user_model().objects.get_or_create(username="bench-turn-cost")[0]
    client = Client()
    client.force_login(user)
    cookie = session_cookie(client)
    conversation = lifecycle.conversation_start(user=user, content="What does a turn cost?", enqueue=False)
    run = conversation.active_branch.runs.get()
    writes = []

    def count_writes(execute, sql, params, many, context):
        if sql.lstrip().split(" ", 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            writes.append(sql)
        return execute(sql, params, many, context)

    def work():
        try:
            with connection.execute_wrapper(count_writes):
                run_execute(run_id=run.pk)
        finally:
            connections.close_all()

    seen, frames = {}, 0

    async def watch():
        nonlocal frames
        communicator = conversation_socket(conversation.pk, cookie=cookie)
        await communicator.connect()
        await asyncio.sleep(0.5)
        worker = threading.Thread(target=work)
        began = time.process_time()
        worker.start()
        while True:
            html = await communicator.receive_from(timeout=60)
            frames += 1
            now = time.monotonic()
            for word in re.findall(r"\bw\d{4}\b", html):
                seen.setdefault(word, now)
            if 'data-status="completed"' in html:
                break
        await asyncio.to_thread(worker.join)
        cpu = time.process_time() - began
        await communicator.disconnect()
        return cpu

    cpu = asyncio.run(watch())
    return {"cpu": cpu, "writes": len(writes), "frames": frames, "seen": seen}


def main() -> None:
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_model_server, args=(child, 2), daemon=True)
    server.start()
    url = parent.recv()
    flush, live = settings.RUN_CHUNK_FLUSH_SECONDS, settings.RUN_LIVE_SECONDS
    results = {"baseline": _turn(url, flush=0.05, live=1e9), "now": _turn(url, flush=flush, live=live)}
    parent.send("done")
    sent = parent.recv()
    server.join(timeout=5)
    layer = "Redis" if settings.REDIS_URL else "Unix sockets (SQLite)"
    print(f"one {TOKENS}-token answer at {TOKENS_PER_SECOND} tokens/s watched by one tab, {layer}:")
    for name, r in results.items():
        # The server's two replies send the same words: each turn's own are the later ones it saw.
        latencies = []
        for word, shown in r["seen"].items():
            times = [at for at, piece in sent if piece.strip() == word and at <= shown]
            if times:
                latencies.append((shown - max(times)) * 1000)
        latencies.sort()
        p50, p95 = statistics.median(latencies), latencies[int(len(latencies) * 0.95) - 1]
        print(
            f"  {name:8} {r['cpu']:5.2f} CPU-s, {r['writes']:4d} rows written, {r['frames']:4d} frames, "
            f"token → page p50 {p50:4.0f} ms p95 {p95:4.0f} ms"
        )
    base, now = results["baseline"], results["now"]
    print(
        f"  now / baseline: CPU {now['cpu'] / base['cpu']:.2f}x, rows {now['writes'] / base['writes']:.2f}x, "
        f"frames {now['frames'] / base['frames']:.2f}x"
    )


if __name__ == "__main__":
    main()
