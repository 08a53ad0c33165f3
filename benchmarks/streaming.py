"""What one watching tab costs while an answer streams, and how soon it sees a token.

1. Bytes and consumer CPU for 500- and 5,000-token answers: the event log is
   written as a worker writes it (a llm_chunk row per flush interval of a model
   at 50 tokens/s), and after every row the page is pushed either a snapshot of
   the whole message (baseline, what the consumer did before) or what is new
   (live.streaming).
2. Token sent by the model → fragment received by the page's websocket, p50 and
   p95, through the real consumer and channel layer (live.layer's Unix sockets
   on SQLite, or Redis when REDIS_URL is set), with the worker's engine in a thread and the
   scripted model server streaming; and rows written per second of streaming.
"""

import asyncio
import re
import statistics
import threading
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connections
from django.test import Client

from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from artifactflow.markdown import markdown_render
from conversations import lifecycle
from live.streaming import stream_advance, stream_open
from tests.answers import long_answer
from tests.asgi import conversation_socket, session_cookie
from tests.model_server import ScriptedModelServer, Text

TOKENS_PER_SECOND = 50


def _user():
    return get_user_model().objects.get_or_create(username="bench-streaming")[0]


def _replay(tokens: int) -> dict:
    answer = long_answer(tokens=tokens)
    words = answer.split(" ")
    per_row = max(1, round(TOKENS_PER_SECOND * settings.RUN_CHUNK_FLUSH_SECONDS))
    conversation = lifecycle.conversation_start(user=_user(), content="benchmark", enqueue=False)
    run = conversation.active_branch.runs.get()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    seq = 0

    def write(type, **data):
        nonlocal seq
        seq += 1
        RunEvent.objects.create(run=run, seq=seq, type=type, agent="lead_agent", data=data)

    write(RunEvent.Type.METADATA, model="bench")
    write(RunEvent.Type.AGENT_START)
    stream, _ = stream_open(conversation=conversation, run_id=run.pk)
    totals = {"snapshot_bytes": 0, "snapshot_cpu": 0.0, "push_bytes": 0, "push_cpu": 0.0, "rows": 0}
    for start in range(0, len(words), per_row):
        write(RunEvent.Type.LLM_CHUNK, content=" ".join(words[start : start + per_row]) + " ")
        totals["rows"] += 1
        began = time.process_time()
        _, html = stream_open(conversation=conversation, run_id=run.pk)
        totals["snapshot_cpu"] += time.process_time() - began
        totals["snapshot_bytes"] += len(html.encode())
        began = time.process_time()
        stream, html = stream_advance(conversation=conversation, stream=stream)
        totals["push_cpu"] += time.process_time() - began
        totals["push_bytes"] += len(html.encode())
    totals["answer_html_bytes"] = len(markdown_render(answer).encode())
    return totals


def _bytes_and_cpu():
    flush = settings.RUN_CHUNK_FLUSH_SECONDS
    print(f"websocket pushes per watching tab, a model at {TOKENS_PER_SECOND} tokens/s, a row per {flush}s:")
    for tokens in (500, 5000):
        t = _replay(tokens)
        html = t["answer_html_bytes"]
        print(
            f"  {tokens:>5} tokens, {t['rows']} rows: whole message per row (baseline) {t['snapshot_bytes'] / 1e6:7.2f} MB "
            f"{t['snapshot_cpu']:6.2f} s CPU | only what is new {t['push_bytes'] / 1e6:6.3f} MB {t['push_cpu']:5.2f} s CPU"
        )
        print(
            f"         final answer HTML {html / 1e3:.1f} KB: bytes {t['push_bytes'] / html:.2f}x the answer "
            f"(baseline {t['snapshot_bytes'] / html:.0f}x); {t['snapshot_bytes'] / t['push_bytes']:.0f}x fewer bytes, "
            f"{t['snapshot_cpu'] / max(t['push_cpu'], 1e-9):.0f}x less CPU"
        )


def _latency(tokens: int = 600) -> None:
    words = [f"w{i:04d}" for i in range(tokens)]
    server = ScriptedModelServer().start()
    settings.ARTIFACTFLOW_LLM = {
        "api_key": "sk-bench",
        "base_url": server.url,
        "model": server.model,
        "timeout": 30.0,
        "max_retries": 0,
    }
    delay = 1 / TOKENS_PER_SECOND
    server.add(Text(" ".join(words) + " ", chunk_size=len("w0000 "), delay=delay))
    user = _user()
    client = Client()
    client.force_login(user)
    cookie = session_cookie(client)
    conversation = lifecycle.conversation_start(user=user, content="latency", enqueue=False)
    run = conversation.active_branch.runs.get()
    seen: dict[str, float] = {}

    def execute():
        try:
            run_execute(run_id=run.pk)
        finally:
            connections.close_all()

    async def watch():
        communicator = conversation_socket(conversation.pk, cookie=cookie)
        await communicator.connect()
        worker = threading.Thread(target=execute)
        await asyncio.sleep(1)
        worker.start()
        while True:
            html = await communicator.receive_from(timeout=30)
            now = time.monotonic()
            for word in re.findall(r"\bw\d+\b", html):
                seen.setdefault(word, now)
            if 'data-status="completed"' in html:
                break
        await communicator.disconnect()
        await sync_to_async(worker.join)()

    asyncio.run(watch())
    server.stop()
    sent = {piece.strip(): at for at, piece in server.sent}
    latencies = sorted((seen[word] - sent[word]) * 1000 for word in words if word in seen and word in sent)
    rows = RunEvent.objects.filter(run=run, type=RunEvent.Type.LLM_CHUNK).count()
    layer = "Redis" if settings.REDIS_URL else "Unix sockets (SQLite)"
    p50, p95 = statistics.median(latencies), latencies[int(len(latencies) * 0.95) - 1]
    print(f"token sent → received by the page, {layer}, {len(latencies)}/{tokens} tokens at {TOKENS_PER_SECOND}/s:")
    print(f"  p50 {p50:.0f} ms, p95 {p95:.0f} ms; {rows / (tokens * delay):.1f} event rows per second of streaming")


def _long_thread(turns: int = 100) -> None:
    """A page of a 100-turn branch: answers rendered once and read back from
    the cache, against rendering every answer's markdown on every view (the
    cache emptied before each: baseline); and what a
    connecting websocket is sent: the whole thread (baseline) or what is live."""
    from django.template.loader import render_to_string

    from agents.thread import thread_for_conversation
    from conversations.models import Message

    user = _user()
    conversation = lifecycle.conversation_start(user=user, content="turn 0", enqueue=False)
    parent = conversation.active_branch
    answer = long_answer(tokens=400)
    Message.objects.filter(pk=parent.pk).update(response=answer)
    for turn in range(1, turns):
        parent = Message.objects.create(
            conversation=conversation, parent=parent, content=f"turn {turn}", response=answer
        )
    Run.objects.filter(message__conversation=conversation).update(status=Run.Status.COMPLETED)
    conversation.active_branch = parent
    conversation.save()
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    url = conversation.get_absolute_url()

    def page_time(*, cold: bool, repeat=5):
        client.get(url)
        spent = 0.0
        for _ in range(repeat):
            if cold:
                cache.clear()
            began = time.perf_counter()
            size = len(client.get(url).content)
            spent += time.perf_counter() - began
        return spent / repeat, size

    stored, size = page_time(cold=False)
    rendered, _ = page_time(cold=True)
    whole_thread = render_to_string(
        "conversations/chat.html#thread", {"entries": thread_for_conversation(conversation=conversation), "oob": True}
    )
    live = "".join(
        stream_open(conversation=conversation, run_id=run_id)[1]
        for run_id in Run.objects.filter(
            message__conversation=conversation, status__in=Run.ACTIVE_STATUSES
        ).values_list("pk", flat=True)
    )
    print(f"a {turns}-turn branch ({size / 1e3:.0f} KB page):")
    print(
        f"  page view: markdown rendered per view (baseline) {rendered * 1000:.0f} ms, "
        f"rendered once {stored * 1000:.0f} ms: {rendered / stored:.1f}x faster"
    )
    print(
        f"  websocket connect: whole thread (baseline) {len(whole_thread.encode()) / 1e3:.0f} KB, "
        f"what is live {len(live.encode())} bytes"
    )


def main():
    _bytes_and_cpu()
    _latency()
    _long_thread()
