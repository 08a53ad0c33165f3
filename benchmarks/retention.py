"""A month's event log and what retention leaves of it (issue 31, item 4).

Turns of an 800-token answer after 150 tokens of thinking, five to a
conversation, are executed by the real worker code (run_execute: engine, event
log, checkpoints) against the scripted model over HTTP. The model streams a
token per chunk; the event log's clock is simulated at 40 tokens/s, so it
writes its `llm_chunk` rows as a worker does today at that speed (one per
ARTIFACTFLOW_CHUNK_FLUSH_SECONDS) without taking 20 s a turn. Then the
retention fold runs over all of them (agents.services.retention).

Printed: database bytes per turn beyond the answer's own text (SQLite pages of
the portal's tables and indexes, the search index included; the channel layer
and task queue left out), before and after the fold; the file's size after the
fold's incremental vacuum; and the fold's time per 1,000 turns.
"""

import time
import types
from datetime import timedelta
from unittest import mock

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from agents import events
from agents.events import RunEventLog
from agents.models import Run, RunEvent
from agents.services import retention
from agents.services.execution import run_execute
from conversations import lifecycle
from conversations.models import Message
from tests.answers import long_answer
from tests.model_server import ScriptedModelServer, Text

TURNS = 100
TURNS_PER_CONVERSATION = 5
ANSWER_TOKENS = 800
THINKING_TOKENS = 150
TOKENS_PER_SECOND = 40
# Not the portal's: the task queue's rows come and go.
TRANSIENT = ("django_q",)


def _portal_bytes() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_schema s ON s.name = d.name GROUP BY s.tbl_name"
        )
        return sum(size for table, size in cursor.fetchall() if not table.startswith(TRANSIENT))


def _file_bytes() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return pages * cursor.fetchone()[0]


class _Clock:
    """The event log's monotonic clock, a token's time further at each streamed piece."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def _month(server: ScriptedModelServer, user) -> tuple[list[int], int]:
    answer = long_answer(tokens=ANSWER_TOKENS)
    thinking = " ".join(f"consider{i}" for i in range(THINKING_TOKENS))
    clock = _Clock()
    chunk = RunEventLog.chunk

    def timed_chunk(log, **kwargs):
        clock.now += 1 / TOKENS_PER_SECOND
        chunk(log, **kwargs)

    run_ids = []
    with (
        mock.patch.object(events, "time", types.SimpleNamespace(monotonic=clock.monotonic)),
        mock.patch.object(RunEventLog, "chunk", timed_chunk),
    ):
        conversation = None
        for turn in range(TURNS):
            server.add(Text(answer, reasoning=thinking, chunk_size=6))
            if turn % TURNS_PER_CONVERSATION == 0:
                conversation = lifecycle.conversation_start(user=user, content=f"Question {turn}?", enqueue=False)
                message = conversation.active_branch
            else:
                message = lifecycle.message_post(conversation=conversation, content=f"Question {turn}?", enqueue=False)
            run = message.runs.get()
            run_execute(run_id=run.pk)
            run_ids.append(run.pk)
    return run_ids, len(answer.encode())


def main():
    if connection.vendor != "sqlite":
        print("retention: measured on SQLite only (dbstat); unset DATABASE_URL")
        return
    server = ScriptedModelServer().start()
    saved_llm = getattr(settings, "ARTIFACTFLOW_LLM", None)
    settings.ARTIFACTFLOW_LLM = {
        "api_key": "sk-bench",
        "base_url": server.url,
        "model": server.model,
        "timeout": 30.0,
        "max_retries": 0,
    }
    user = get_user_model().objects.get_or_create(username="bench-retention")[0]
    try:
        before = _portal_bytes()
        started = time.perf_counter()
        run_ids, answer_bytes = _month(server, user)
        written = time.perf_counter() - started
        runs = Run.objects.filter(pk__in=run_ids)
        assert runs.filter(status=Run.Status.COMPLETED).count() == TURNS
        chunk_rows = RunEvent.objects.filter(run__in=runs, type=RunEvent.Type.LLM_CHUNK).count()
        rows = RunEvent.objects.filter(run__in=runs).count()
        unfolded = _portal_bytes() - before
        file_unfolded = _file_bytes()

        started = time.perf_counter()
        report = retention.runs_fold(finished_before=timezone.now() + timedelta(seconds=1))
        fold_seconds = time.perf_counter() - started
        assert report.runs == TURNS
        folded = _portal_bytes() - before
        file_folded = _file_bytes()
        rows_after = RunEvent.objects.filter(run__in=runs).count()
        # What each turn keeps of its text besides the answer: the model's thinking.
        thinking_bytes = sum(
            len(str(text).encode())
            for text in RunEvent.objects.filter(run__in=runs, type=RunEvent.Type.LLM_COMPLETE).values_list(
                "data__reasoning", flat=True
            )
        )
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")
        vacuumed = _portal_bytes() - before
        file_vacuumed = _file_bytes()
    finally:
        server.stop()
        settings.ARTIFACTFLOW_LLM = saved_llm
        Message.objects.filter(conversation__owner=user).delete()
        user.delete()

    flush = settings.RUN_CHUNK_FLUSH_SECONDS
    print(
        f"retention, {TURNS} turns of {ANSWER_TOKENS}-token answers ({answer_bytes / 1e3:.1f} KB of text) after "
        f"{THINKING_TOKENS} tokens of thinking, {TURNS_PER_CONVERSATION} to a conversation, streamed at "
        f"{TOKENS_PER_SECOND} tokens/s with a row per {flush}s ({settings.DATABASES['default']['ENGINE']}):"
    )
    print(
        f"  written by today's worker: {rows / TURNS:.0f} event rows a turn ({chunk_rows / TURNS:.0f} llm_chunk), "
        f"{unfolded / TURNS / 1e3:.1f} KB a turn, {(unfolded / TURNS - answer_bytes) / 1e3:.1f} KB beyond the answer's "
        f"text ({written / TURNS * 1000:.0f} ms a turn to execute)"
    )
    beyond = folded / TURNS - answer_bytes
    print(
        f"  folded: {rows_after / TURNS:.0f} event rows a turn, {folded / TURNS / 1e3:.1f} KB a turn, "
        f"{beyond / 1e3:.1f} KB beyond the answer's text (target ≤ 10 KB), {unfolded / max(folded, 1):.1f}x smaller; "
        f"after VACUUM {(vacuumed / TURNS - answer_bytes) / 1e3:.1f} KB beyond it"
    )
    print(
        f"     of which the thinking {thinking_bytes / TURNS / 1e3:.1f} KB; the rest (rows, indexes, metrics, "
        f"search index, free space in pages) {(beyond - thinking_bytes / TURNS) / 1e3:.1f} KB"
    )
    print(
        f"  the fold: {fold_seconds / TURNS * 1000:.1f} s per 1,000 turns, "
        f"{fold_seconds / (TURNS / retention.FOLD_BATCH) * 1000:.0f} ms a batch of {retention.FOLD_BATCH} (its transaction); "
        f"file {file_unfolded / 1e6:.1f} MB → {file_folded / 1e6:.1f} MB after its incremental vacuum, "
        f"{file_vacuumed / 1e6:.1f} MB after VACUUM"
    )
