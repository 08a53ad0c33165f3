"""Run lifecycle: create and enqueue, claim, execute, finish."""

import logging
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_q.tasks import async_task

from artifacts.live import ARTIFACTS_CHANGED
from artifacts.manager import ArtifactManager, FlushReport

from . import engine
from .events import GroupPublisher, RunEventLog
from .llm import ModelError, chat_model_from_settings
from .models import Run, RunEvent

logger = logging.getLogger(__name__)

TASK = "agents.tasks.run_turn"
WORKER_DIED = "The worker running this turn stopped. Ask again to retry."


def run_create(*, message, enqueue: bool = True) -> Run:
    """A queued run for `message`; its task is enqueued once the caller's transaction commits."""
    run = Run.objects.create(message=message)
    if enqueue:
        transaction.on_commit(lambda: async_task(TASK, run.pk, task_name=f"run-{run.pk}"))
    return run


def run_claim(*, run_id: int) -> Run | None:
    """Take a queued run for this worker. Returns None when it is not queued any
    more (a second delivery of the same task, or a run already finished)."""
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING, attempts=F("attempts") + 1, started_at=now, heartbeat_at=now
    )
    if not claimed:
        return None
    return Run.objects.select_related("message__conversation").get(pk=run_id)


def _run_take_stale(*, run_id: int) -> Run | None:
    """Fail a running run whose worker stopped sending heartbeats (the task was
    delivered again because that worker died). Returns it, or None."""
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE)
    taken = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff).update(
        status=Run.Status.FAILED, finished_at=timezone.now(), error=WORKER_DIED
    )
    return Run.objects.select_related("message__conversation").get(pk=run_id) if taken else None


@contextmanager
def _event_log(run: Run, on_event):
    publisher = GroupPublisher()
    try:
        yield RunEventLog(run=run, publisher=publisher, on_event=on_event)
    finally:
        publisher.close()


def run_execute(*, run_id: int, model=None, on_event=None) -> Run | None:
    """Execute a run's turn to its end: completed with the response stored, or
    failed with an `error` event that says why. Returns the finished run, or
    None when there was nothing to do."""
    run = run_claim(run_id=run_id)
    if run is None:
        run = _run_take_stale(run_id=run_id)
        if run is not None:
            with _event_log(run, on_event) as log:
                log.emit(RunEvent.Type.ERROR, data={"message": WORKER_DIED})
        return run

    with _event_log(run, on_event) as log:
        artifacts = ArtifactManager(
            session=run.message.conversation.artifact_session,
            run_id=run.pk,
            on_change=lambda: log.announce(ARTIFACTS_CHANGED),
        )
        try:
            model = model or chat_model_from_settings()
            run.model = model.name
            run.save(update_fields=["model"])
            log.emit(
                RunEvent.Type.METADATA,
                data={
                    "conversation_id": str(run.message.conversation_id),
                    "message_id": run.message_id,
                    "run_id": run.pk,
                    "model": model.name,
                    "demo": model.demo,
                },
            )
            result = engine.turn_execute(run=run, model=model, log=log, artifacts=artifacts)
        except ModelError as exc:
            _run_fail(run=run, log=log, error=str(exc), flush=_artifacts_flush(artifacts))
        except Exception:
            logger.exception("Run %s failed", run.pk)
            _run_fail(
                run=run,
                log=log,
                error="An internal error stopped this turn. It has been logged.",
                flush=_artifacts_flush(artifacts),
            )
        else:
            _run_complete(run=run, log=log, result=result, flush=_artifacts_flush(artifacts))
    return run


def _artifacts_flush(artifacts: ArtifactManager) -> FlushReport:
    """Save what the turn changed, whatever way it ended; the terminal event
    reports what could not be saved."""
    return artifacts.flush_all()


def _flush_data(flush: FlushReport) -> dict:
    return {"artifacts": {"flushed": flush.flushed, "conflicts": flush.conflicts, "failed": flush.failed}}


def _run_complete(*, run: Run, log: RunEventLog, result: engine.TurnResult, flush: FlushReport) -> None:
    now = timezone.now()
    with transaction.atomic():
        run.message.response = result.response
        run.message.save(update_fields=["response"])
        run.status, run.finished_at, run.metrics = Run.Status.COMPLETED, now, result.metrics
        run.save(update_fields=["status", "finished_at", "metrics"])
        log.emit(
            RunEvent.Type.COMPLETE,
            data={
                "response": result.response,
                "duration_ms": result.metrics.get("total_duration_ms"),
                **_flush_data(flush),
            },
        )


def _run_fail(*, run: Run, log: RunEventLog, error: str, flush: FlushReport | None = None) -> None:
    with transaction.atomic():
        run.status, run.finished_at, run.error = Run.Status.FAILED, timezone.now(), error
        run.save(update_fields=["status", "finished_at", "error"])
        log.emit(RunEvent.Type.ERROR, data={"message": error, **_flush_data(flush or FlushReport())})
