"""Retention of runs' event logs: what a reload, the trace and a resume need, and no more.

A run that has ended (completed, failed or cancelled; never one that is
queued, running or waiting for permission, which resumes from its checkpoint
and events) is *folded* once, `RUN_FOLD_AFTER_MINUTES` after it ended:

- its `llm_chunk` rows go where the `llm_complete` after them carries the
  call's whole content and reasoning; a call that has none (stopped, failed
  or broken off mid-stream) keeps its streamed text as one `llm_chunk` row;
- the answer is stored once: the `complete` event, the lead's
  `agent_complete` and its last `llm_complete` lose the text when it is the
  message's response, which readers show in its place (docs/events.md);
- the checkpoint loses the turn's state (its whole context), which only a
  resume reads; artifacts it carries unsaved stay for an administrator.

The page of a finished run reads none of these (its answer and thinking come
from the message and the `llm_complete` events, its activity and trace skip
the chunks), so it renders the same before and after.

Conversations idle for `RUN_EVENT_RETENTION_DAYS` (unset: never) lose their
runs' events altogether: their answers stay, their activity and trace do not.

Work is done in batches, each its own short transaction, by a django-q2
schedule (agents.apps), so no request and no long transaction waits on it.
"""

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, Subquery
from django.utils import timezone
from django_q.tasks import async_task

from conversations.models import Conversation

from ..config import LEAD_AGENT
from ..models import Run, RunEvent

logger = logging.getLogger(__name__)

ENDED = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)
# Runs folded in one transaction. A turn streamed today has a few hundred
# chunk rows (a dozen or two once workers write about one a second), so a
# batch holds SQLite's write lock for well under a tenth of a second.
FOLD_BATCH = 5
# Events deleted in one transaction when conversations expire.
EXPIRE_BATCH = 5000
# Free pages SQLite gives back to the file system after each batch
# (PRAGMA incremental_vacuum), 4 KiB each: bounded, so no batch stalls writers.
VACUUM_PAGES = 2000
# How long one scheduled sweep works before it leaves the rest to the next.
SWEEP_SECONDS = 60
FOLD_TASK = "agents.tasks.runs_fold"


@dataclass
class FoldReport:
    runs: int = 0
    # Chunk rows deleted, and rows left holding an interrupted call's streamed text.
    chunks_deleted: int = 0
    chunks_kept: int = 0
    # Copies of the answer removed from events (the message keeps it).
    answers_removed: int = 0


def runs_foldable(*, finished_before: datetime):
    """The ended runs not folded yet that finished before `finished_before`."""
    return Run.objects.filter(status__in=ENDED, folded_at__isnull=True, finished_at__lt=finished_before)


def run_fold(*, run: Run, report: FoldReport) -> None:
    """Fold one ended run, inside the caller's transaction (see the module's note)."""
    events = list(run.events.order_by("seq").values_list("seq", "type", "agent"))
    kept: list[int] = []
    first = None
    for index, (seq, type, agent) in enumerate(events):
        if type != RunEvent.Type.LLM_CHUNK:
            continue
        first = first or seq
        following = events[index + 1] if index + 1 < len(events) else None
        if following is not None and following[1] == RunEvent.Type.LLM_CHUNK and following[2] == agent:
            continue
        if following is None or following[1] != RunEvent.Type.LLM_COMPLETE or following[2] != agent:
            kept.append(_chunks_fold(run=run, first=first, last=seq))
        first = None
    report.chunks_deleted += run.events.filter(type=RunEvent.Type.LLM_CHUNK).exclude(seq__in=kept).delete()[0]
    report.chunks_kept += len(kept)
    report.answers_removed += _answer_copies_remove(run)
    carried = (run.checkpoint or {}).get("artifacts") or []
    run.checkpoint = {"artifacts": carried} if carried else {}
    run.folded_at = timezone.now()
    run.save(update_fields=["checkpoint", "folded_at"])
    report.runs += 1


def _chunks_fold(*, run: Run, first: int, last: int) -> int:
    """One interrupted call's streamed text (its chunk rows, seq `first` to
    `last`) in its first row; returns that row's seq."""
    if last > first:
        rows = run.events.filter(seq__range=(first, last)).order_by("seq").values_list("data", flat=True)
        content = "".join(str(data.get("content", "")) for data in rows)
        reasoning = "".join(str(data.get("reasoning", "")) for data in rows)
        data = {"content": content, **({"reasoning": reasoning} if reasoning else {})}
        run.events.filter(seq=first).update(data=data)
    return first


# The event types that repeat the answer, and the field each repeats it in.
_ANSWER_FIELDS = {
    RunEvent.Type.COMPLETE: "response",
    RunEvent.Type.AGENT_COMPLETE: "response",
    RunEvent.Type.LLM_COMPLETE: "content",
}


def _answer_copies_remove(run: Run) -> int:
    answer = run.message.response
    if not answer:
        return 0
    removed = 0
    copies = run.events.filter(type__in=_ANSWER_FIELDS).filter(Q(type=RunEvent.Type.COMPLETE) | Q(agent=LEAD_AGENT))
    for event in copies.only("pk", "type", "data"):
        field = _ANSWER_FIELDS[event.type]
        # Only a copy equal to the message's response: the readers put that back.
        if event.data.get(field) == answer:
            data = {key: value for key, value in event.data.items() if key != field}
            RunEvent.objects.filter(pk=event.pk).update(data=data)
            removed += 1
    return removed


def runs_fold(*, finished_before: datetime, seconds: float | None = None) -> FoldReport:
    """Fold the ended runs that finished before `finished_before`, a batch per
    transaction, oldest first, until none is left or `seconds` have passed."""
    report = FoldReport()
    started = time.monotonic()
    while seconds is None or time.monotonic() - started < seconds:
        with transaction.atomic():
            batch = list(
                runs_foldable(finished_before=finished_before)
                .select_for_update()
                .select_related("message")
                .order_by("finished_at", "pk")[:FOLD_BATCH]
            )
            for run in batch:
                run_fold(run=run, report=report)
        if not batch:
            break
        storage_reclaim()
    return report


def events_expirable(*, idle_before: datetime):
    """The events of ended runs in conversations idle since before
    `idle_before`, but those on hold (retention)."""
    idle = Conversation.objects.filter(updated_at__lt=idle_before, retention_hold=False).values("pk")
    return RunEvent.objects.filter(run__status__in=ENDED, run__message__conversation__in=idle)


def events_expire(*, idle_before: datetime, seconds: float | None = None) -> int:
    """Delete events_expirable, a batch per transaction; returns how many."""
    expired = events_expirable(idle_before=idle_before)
    deleted = 0
    started = time.monotonic()
    while seconds is None or time.monotonic() - started < seconds:
        with transaction.atomic():
            count = RunEvent.objects.filter(pk__in=Subquery(expired.values("pk")[:EXPIRE_BATCH])).delete()[0]
        if not count:
            break
        deleted += count
        storage_reclaim()
    return deleted


def storage_reclaim() -> None:
    """On SQLite, give up to VACUUM_PAGES free pages back to the file system;
    a file made before auto_vacuum was set reclaims none until `manage.py
    retention --vacuum` (README: Retention). Postgres reuses the space itself."""
    # Inside a transaction (a caller's, or a test's) the pages are not free yet.
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        if cursor.fetchone()[0] != 2:
            return
    # Python's sqlite3 steps a statement once, which frees one page; a script runs it to the end.
    connection.connection.executescript(f"PRAGMA incremental_vacuum({VACUUM_PAGES})")


def runs_fold_requested(*, older_than_days: int, enqueue: bool = False) -> int:
    """An administrator's fold of the runs that ended more than
    `older_than_days` ago: how many there are, and with `enqueue` their fold
    handed to a worker (runs_fold_task), so the request returns at once."""
    if older_than_days < 0:
        raise ValueError("The number of days cannot be negative.")
    count = runs_foldable(finished_before=timezone.now() - timedelta(days=older_than_days)).count()
    if enqueue and count:
        transaction.on_commit(lambda: async_task(FOLD_TASK, older_than_days, task_name=f"runs-fold-{older_than_days}d"))
    return count


def retention_sweep(*, seconds: float | None = SWEEP_SECONDS) -> dict:
    """The scheduled retention: fold what ended RUN_FOLD_AFTER_MINUTES ago,
    then expire idle conversations' events when RUN_EVENT_RETENTION_DAYS is set
    (the admin's retention policies do the rest: retention.services)."""
    now = timezone.now()
    started = time.monotonic()
    report = runs_fold(finished_before=now - timedelta(minutes=settings.RUN_FOLD_AFTER_MINUTES), seconds=seconds)
    expired = 0
    if settings.RUN_EVENT_RETENTION_DAYS is not None:
        left = None if seconds is None else max(seconds - (time.monotonic() - started), 0)
        expired = events_expire(idle_before=now - timedelta(days=settings.RUN_EVENT_RETENTION_DAYS), seconds=left)
    if report.runs or expired:
        logger.info(
            "Retention folded %s runs (%s streamed-text rows deleted) and deleted %s events of idle conversations",
            report.runs,
            report.chunks_deleted,
            expired,
        )
    return {"folded": report.runs, "chunks_deleted": report.chunks_deleted, "expired": expired}


def runs_fold_older(*, older_than_days: int) -> FoldReport:
    """The fold an administrator asked for, in a worker: every run that ended
    more than `older_than_days` ago, in batches."""
    return runs_fold(finished_before=timezone.now() - timedelta(days=older_than_days))
