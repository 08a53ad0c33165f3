"""Run lifecycle: create and enqueue, claim, execute, finish."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_q.tasks import async_task

from artifacts.manager import ArtifactManager, FlushReport
from conversations.markdown import markdown_render
from conversations.selectors import message_path

from . import engine
from .events import RunEventLog
from .llm import ModelError, models_from_settings
from .models import Run, RunEvent

logger = logging.getLogger(__name__)

TASK = "agents.tasks.run_turn"
WORKER_DIED = "The worker running this turn stopped twice. Ask again to retry."
# A run is started once and, if its worker dies, resumed once.
RUN_MAX_ATTEMPTS = 2
CANCELLED = "Cancelled."
# Message metadata key: tools the user always allows on the branch through it.
ALLOWED_TOOLS = "allowed_tools"


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


def _run_recover_stale(*, run_id: int) -> Run | None:
    """A running run whose worker stopped sending heartbeats is queued again to
    continue from its last checkpoint — once; after that it fails with a
    visible reason. Returns the run when it was recovered either way."""
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE)
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .select_related("message__conversation")
            .filter(pk=run_id, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff)
            .first()
        )
        if run is None:
            return None
        if run.attempts < RUN_MAX_ATTEMPTS:
            run.status = Run.Status.QUEUED
            run.save(update_fields=["status"])
            transaction.on_commit(lambda: async_task(TASK, run.pk, task_name=f"run-{run.pk}-recover"))
            return run
        run.status, run.finished_at, run.error = Run.Status.FAILED, timezone.now(), WORKER_DIED
        run.save(update_fields=["status", "finished_at", "error"])
    log = RunEventLog(run=run)
    log.emit(RunEvent.Type.ERROR, data={"message": WORKER_DIED, **_flush_data(FlushReport())})
    return run


def runs_sweep() -> dict:
    """The periodic check (a django-q2 schedule): recover runs whose worker
    died and expire unanswered permission requests."""
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE)
    stale = Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=cutoff).values_list("pk", flat=True)
    recovered = sum(1 for run_id in list(stale) if _run_recover_stale(run_id=run_id) is not None)
    return {"recovered": recovered, "expired": permissions_expire()}


def run_execute(*, run_id: int, on_event=None) -> Run | None:
    """Execute a run's turn from where it stands until it completes, waits for
    the user's permission, is cancelled or fails with an `error` event that says
    why. Returns the run, or None when there was nothing to do."""
    run = run_claim(run_id=run_id)
    if run is None:
        # A redelivered task: its run is done, or its worker died (then it is
        # queued again, with a task of its own).
        _run_recover_stale(run_id=run_id)
        return None

    log = RunEventLog(run=run, on_event=on_event)
    artifacts = ArtifactManager(
        session=run.message.conversation.artifact_session,
        run_id=run.pk,
        on_change=log.artifacts_changed,
    )
    try:
        models = models_from_settings()
        if run.checkpoint:
            state = engine.TurnState.from_checkpoint(run.checkpoint["turn"])
            artifacts.restore(run.checkpoint.get("artifacts", []))
            if run.attempts > 1:
                log.emit(RunEvent.Type.METADATA, data={"run_id": run.pk, "model": models.default.name, "resumed": True})
        else:
            state = _run_start(run=run, model=models.default, log=log)
        outcome = engine.turn_execute(
            run=run,
            models=models,
            log=log,
            artifacts=artifacts,
            state=state,
            is_cancelled=lambda: Run.objects.filter(pk=run.pk, cancel_requested=True).exists(),
            checkpoint=lambda state: _run_checkpoint(run=run, state=state, artifacts=artifacts),
        )
    except (ModelError, ImproperlyConfigured) as exc:
        _run_fail(run=run, log=log, error=str(exc), flush=artifacts.flush_all())
    except Exception:
        logger.exception("Run %s failed", run.pk)
        _run_fail(
            run=run,
            log=log,
            error="An internal error stopped this turn. It has been logged.",
            flush=artifacts.flush_all(),
        )
    else:
        # Whatever way the loop ended, the turn's artifacts are saved first;
        # the checkpoint then no longer carries them.
        flush = artifacts.flush_all()
        _run_checkpoint(run=run, state=state, artifacts=artifacts)
        _run_finish(run=run, log=log, outcome=outcome, flush=flush)
    return run


def _run_start(*, run: Run, model, log: RunEventLog) -> engine.TurnState:
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
    return engine.turn_state_new(message=run.message, allowed=branch_allowed_tools(message=run.message))


def _run_checkpoint(*, run: Run, state: engine.TurnState, artifacts: ArtifactManager) -> None:
    run.checkpoint = {"turn": state.to_checkpoint(), "artifacts": artifacts.working_state()}
    Run.objects.filter(pk=run.pk).update(checkpoint=run.checkpoint, heartbeat_at=timezone.now())


def branch_allowed_tools(*, message) -> list[str]:
    """Tools the user chose to always allow on this branch (root to `message`)."""
    allowed = set()
    for step in message_path(message_id=message.pk):
        allowed.update(step.metadata.get(ALLOWED_TOOLS, []))
    return sorted(allowed)


def _flush_data(flush: FlushReport) -> dict:
    return {"artifacts": {"flushed": flush.flushed, "conflicts": flush.conflicts, "failed": flush.failed}}


def _run_finish(*, run: Run, log: RunEventLog, outcome: engine.TurnOutcome, flush: FlushReport) -> None:
    now = timezone.now()
    with transaction.atomic():
        run.metrics = outcome.metrics
        if outcome.status == "waiting_permission":
            # No worker waits for a human: the task ends here and an answer
            # enqueues the run again (permission_answer).
            run.status = Run.Status.WAITING_PERMISSION
            run.save(update_fields=["status", "metrics"])
            if flush.failed:
                logger.error("Run %s paused with unsaved artifacts: %s", run.pk, flush.failed)
            return
        run.message.response = outcome.response
        run.message.response_html = markdown_render(outcome.response)
        run.message.save(update_fields=["response", "response_html"])
        run.finished_at = now
        if outcome.status == "cancelled":
            run.status = Run.Status.CANCELLED
            run.save(update_fields=["status", "finished_at", "metrics"])
            log.emit(RunEvent.Type.ERROR, data={"message": CANCELLED, "cancelled": True, **_flush_data(flush)})
            return
        run.status = Run.Status.COMPLETED
        run.save(update_fields=["status", "finished_at", "metrics"])
        log.emit(
            RunEvent.Type.COMPLETE,
            data={
                "response": outcome.response,
                "duration_ms": outcome.metrics.get("total_duration_ms"),
                **_flush_data(flush),
            },
        )


def _run_fail(*, run: Run, log: RunEventLog, error: str, flush: FlushReport) -> None:
    with transaction.atomic():
        run.status, run.finished_at, run.error = Run.Status.FAILED, timezone.now(), error
        run.save(update_fields=["status", "finished_at", "error"])
        log.emit(RunEvent.Type.ERROR, data={"message": error, **_flush_data(flush)})


# --- what the user does to a run ----------------------------------------------------


class RunStateError(Exception):
    """The run is not in a state that allows this; the message says why."""


def _run_owned_locked(*, run_id: int, user) -> Run:
    run = Run.objects.select_for_update().filter(pk=run_id, message__conversation__owner=user).first()
    if run is None:
        raise Run.DoesNotExist
    return run


def permission_answer(*, run_id: int, user, request_id: str, decision: str, enqueue: bool = True) -> Run:
    """Record the owner's answer to the run's open permission request and
    enqueue the run to continue (unless the caller runs it itself). A stale or
    repeated answer is refused."""
    with transaction.atomic():
        run = _run_owned_locked(run_id=run_id, user=user)
        if decision not in (engine.APPROVE, engine.ALWAYS, engine.DENY):
            raise RunStateError("Answer approve, always or deny.")
        _pending_decide(run=run, request_id=request_id, decision=decision, enqueue=enqueue)
        if decision == engine.ALWAYS:
            message = run.message
            tools = set(message.metadata.get(ALLOWED_TOOLS, [])) | {run.checkpoint["turn"]["pending"]["tool"]}
            message.metadata = {**message.metadata, ALLOWED_TOOLS: sorted(tools)}
            message.save(update_fields=["metadata"])
    return run


def _pending_decide(*, run: Run, request_id: str, decision: str, enqueue: bool = True) -> None:
    turn = (run.checkpoint or {}).get("turn", {})
    pending = turn.get("pending")
    if run.status != Run.Status.WAITING_PERMISSION or not pending or pending["id"] != request_id:
        raise RunStateError("This request is no longer open: it was answered already or the turn moved on.")
    run.checkpoint = {**run.checkpoint, "turn": {**turn, "pending": {**pending, "decision": decision}}}
    run.status = Run.Status.QUEUED
    run.save(update_fields=["checkpoint", "status"])
    if enqueue:
        transaction.on_commit(lambda: async_task(TASK, run.pk, task_name=f"run-{run.pk}-resume"))


def permissions_expire() -> int:
    """Answer every permission request older than PERMISSION_TIMEOUT as denied."""
    expired = 0
    now = timezone.now()
    for run_id in Run.objects.filter(status=Run.Status.WAITING_PERMISSION).values_list("pk", flat=True):
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            pending = (run.checkpoint or {}).get("turn", {}).get("pending") or {}
            if run.status != Run.Status.WAITING_PERMISSION or not pending.get("expires_at"):
                continue
            if datetime.fromisoformat(pending["expires_at"]) > now:
                continue
            _pending_decide(run=run, request_id=pending["id"], decision=engine.EXPIRED)
            expired += 1
    return expired


def run_cancel(*, run_id: int, user) -> Run:
    """Cancel the owner's run. A queued or waiting run ends at once; a running
    one is flagged and its worker stops at the next check."""
    with transaction.atomic():
        run = _run_owned_locked(run_id=run_id, user=user)
        if not run.is_active:
            raise RunStateError("This turn has already ended.")
        run.cancel_requested = True
        if run.status == Run.Status.RUNNING:
            run.save(update_fields=["cancel_requested"])
            return run
        run.status, run.finished_at = Run.Status.CANCELLED, timezone.now()
        run.save(update_fields=["cancel_requested", "status", "finished_at"])
    log = RunEventLog(run=run)
    log.emit(RunEvent.Type.ERROR, data={"message": CANCELLED, "cancelled": True, **_flush_data(FlushReport())})
    return run


def run_retry(*, run_id: int, user) -> Run:
    """A new run for the message of the owner's failed or cancelled run."""
    with transaction.atomic():
        run = _run_owned_locked(run_id=run_id, user=user)
        if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
            raise RunStateError("Only a failed or cancelled turn can be tried again.")
        if run.message.runs.filter(pk__gt=run.pk).exists():
            raise RunStateError("This turn was tried again already.")
        return run_create(message=run.message)
