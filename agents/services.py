"""Run lifecycle: create and enqueue, claim, execute, finish."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django_q.tasks import async_task

from artifactflow.db import TRANSIENT_ERRORS, transient_retry
from artifacts.branches import Branch, branch_at
from artifacts.manager import ArtifactManager, FlushReport
from conversations.markdown import markdown_render
from conversations.models import Conversation
from conversations.tree import message_path

from . import engine
from .events import RunEventLog
from .lease import HOST, Heartbeat, Lease, LeaseLost, worker_gone, worker_name
from .llm import ModelError, models_from_settings
from .models import Run, RunEvent
from .selectors import RunView, run_view_apply

logger = logging.getLogger(__name__)

TASK = "agents.tasks.run_turn"
WORKER_DIED = "The worker running this turn stopped twice. Ask again to retry."
# A run whose worker dies is resumed once from its checkpoint; a second death
# fails it. Claims after a permission answer are not deaths.
WORKER_DEATHS_RESUMED = 1
CANCELLED = "Cancelled."
ARTIFACTS_NOT_SAVED = "The answer is complete, but not all its artifacts were saved. Ask again to have them written."
INTERNAL_ERROR = "An internal error stopped this turn. It has been logged."
# Message metadata key: tools the user always allows on the branch through it.
ALLOWED_TOOLS = "allowed_tools"
TURN_IN_PROGRESS = "A turn is still running in this conversation. Stop it, or wait for it to finish, then send."


def run_create(*, message, enqueue: bool = True) -> Run:
    """A queued run for `message`; its task is enqueued once the caller's transaction commits.

    One turn at a time per conversation: turns share the conversation's
    artifacts, so a second one would race the first on them."""
    with transaction.atomic():
        # A write first, so that two requests serialise here on SQLite (which
        # has no row locks) as on Postgres, and the second sees the first's run.
        Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
        if Run.objects.filter(
            message__conversation_id=message.conversation_id, status__in=Run.ACTIVE_STATUSES
        ).exists():
            raise TurnInProgress(TURN_IN_PROGRESS)
        run = Run.objects.create(message=message)
    if enqueue:
        transaction.on_commit(lambda: async_task(TASK, run.pk, task_name=f"run-{run.pk}"))
    return run


def run_claim(*, run_id: int) -> Run | None:
    """Take a queued run for this worker under a new attempt number (its
    lease). Returns None when it is not queued any more (a second delivery of
    the same task, or a run already finished)."""
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING,
        attempts=F("attempts") + 1,
        started_at=now,
        heartbeat_at=now,
        worker=worker_name(),
    )
    if not claimed:
        return None
    return Run.objects.select_related("message__conversation").get(pk=run_id)


def _worker_dead(run: Run) -> bool:
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE)
    return run.heartbeat_at is None or run.heartbeat_at < cutoff or worker_gone(run.worker)


def _run_recover_dead(*, run_id: int) -> Run | None:
    """A running run whose worker died is queued again to continue from its
    last checkpoint — once; the second death fails it, its artifacts saved and
    the answer the page showed kept. Returns the run when it was recovered
    either way."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .select_related("message__conversation")
            .filter(pk=run_id, status=Run.Status.RUNNING)
            .first()
        )
        if run is None or not _worker_dead(run):
            return None
        run.worker_deaths += 1
        log = RunEventLog(run=run)
        if run.worker_deaths > WORKER_DEATHS_RESUMED:
            _run_end_unheld(run=run, log=log, status=Run.Status.FAILED, error=WORKER_DIED)
            return run
        run.status, run.worker = Run.Status.QUEUED, ""
        run.save(update_fields=["status", "worker", "worker_deaths"])
        # The step the dead worker was in is done again; the page says so now.
        log.emit(RunEvent.Type.METADATA, data={"run_id": run.pk, "model": run.model, "resumed": True})
        transaction.on_commit(lambda: async_task(TASK, run.pk, task_name=f"run-{run.pk}-recover"))
    return run


def runs_recover() -> int:
    """Recover every running run whose worker died: its heartbeat is stale, or
    it was a process of this host that is gone (known at once, which is what a
    worker starting after a crash or a restart checks)."""
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE)
    running = Run.objects.filter(status=Run.Status.RUNNING)
    dead = set(running.filter(heartbeat_at__lt=cutoff).values_list("pk", flat=True))
    local = running.filter(worker__startswith=f"{HOST}:").values_list("pk", "worker")
    dead.update(pk for pk, worker in local if worker_gone(worker))
    return sum(1 for run_id in sorted(dead) if _run_recover_dead(run_id=run_id) is not None)


def runs_sweep() -> dict:
    """The periodic check (a django-q2 schedule, and each worker as it starts):
    recover runs whose worker died and expire unanswered permission requests."""
    return {"recovered": runs_recover(), "expired": permissions_expire()}


def run_execute(*, run_id: int, on_event=None) -> Run | None:
    """Execute a run's turn from where it stands until it completes, waits for
    the user's permission, is cancelled or fails with an `error` event that says
    why. Returns the run, or None when there was nothing to do or this worker
    lost the run to another."""
    run = run_claim(run_id=run_id)
    if run is None:
        # A redelivered task: its run is done, or its worker died (then it is
        # queued again, with a task of its own).
        _run_recover_dead(run_id=run_id)
        return None

    lease = Lease(run_id=run.pk, attempt=run.attempts)
    log = RunEventLog(run=run, lease=lease, on_event=on_event)
    artifacts = ArtifactManager(
        branch=_run_branch(run),
        run_id=run.pk,
        on_change=log.artifacts_changed,
        fence=lease.hold,
    )
    with Heartbeat(lease) as heartbeat:
        try:
            _run_drive(run=run, lease=lease, log=log, artifacts=artifacts, heartbeat=heartbeat)
        except LeaseLost:
            logger.warning(
                "Run %s is held by another worker now; this one stops without writing", run.pk, exc_info=True
            )
            return None
        except TRANSIENT_ERRORS:
            # The database stayed away past DB_RETRY_SECONDS, so nothing more
            # can be written. With its heartbeat stopped the run is resumed
            # from its last checkpoint by the sweep once the database is back.
            logger.exception("Run %s lost its database; left to the recovery sweep", run.pk)
            return None
    return run


def _run_drive(*, run: Run, lease: Lease, log: RunEventLog, artifacts: ArtifactManager, heartbeat: Heartbeat) -> None:
    try:
        models = models_from_settings()
        if run.checkpoint:
            state = engine.TurnState.from_checkpoint(run.checkpoint["turn"])
            artifacts.restore(run.checkpoint.get("artifacts", []))
        else:
            state = _run_start(run=run, model=models.default, log=log)
        outcome = engine.turn_execute(
            run=run,
            models=models,
            log=log,
            artifacts=artifacts,
            state=state,
            is_cancelled=lambda: _run_interrupted(run=run, heartbeat=heartbeat),
            checkpoint=lambda state: _run_checkpoint(run=run, lease=lease, state=state, artifacts=artifacts),
        )
    except (LeaseLost, *TRANSIENT_ERRORS):
        raise
    except (ModelError, ImproperlyConfigured) as exc:
        _run_fail(run=run, lease=lease, log=log, error=str(exc), flush=artifacts.flush_all())
    except Exception:
        logger.exception("Run %s failed", run.pk)
        _run_fail(run=run, lease=lease, log=log, error=INTERNAL_ERROR, flush=artifacts.flush_all())
    else:
        # However the loop ended, the turn's artifacts are saved first; the
        # checkpoint then no longer carries them. A turn paused for the user's
        # permission keeps them in the checkpoint instead: one version per
        # artifact per turn, paused or not (seed 000).
        flush = FlushReport() if outcome.status == "waiting_permission" else artifacts.flush_all()
        _run_checkpoint(run=run, lease=lease, state=state, artifacts=artifacts)
        _run_finish(run=run, lease=lease, log=log, outcome=outcome, flush=flush)


def _run_branch(run: Run) -> Branch:
    """The artifacts a turn works on: its message's branch."""
    return branch_at(session=run.message.conversation.artifact_session, message_id=run.message_id)


def _run_interrupted(*, run: Run, heartbeat: Heartbeat) -> bool:
    """The engine's check between steps and while streaming: True when the
    user cancelled; LeaseLost when the run is not this worker's any more."""
    if heartbeat.lost:
        raise LeaseLost(f"run {run.pk} was taken over")
    try:
        return Run.objects.filter(pk=run.pk, cancel_requested=True).exists()
    except TRANSIENT_ERRORS:
        # Not knowing is not cancelled: the next write waits for the database.
        connection.close()
        return False


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


def _run_checkpoint(*, run: Run, lease: Lease, state: engine.TurnState, artifacts: ArtifactManager) -> None:
    run.checkpoint = {"turn": state.to_checkpoint(), "artifacts": artifacts.working_state()}

    def write():
        with transaction.atomic():
            lease.hold(checkpoint=run.checkpoint)

    transient_retry(write, what=f"the checkpoint of run {run.pk}")
    # Working copies the live cache missed while it was down reach the pane now.
    artifacts.live_republish()


def tools_allowed(*, messages) -> list[str]:
    """Tools the user chose to always allow on the branch these messages make up."""
    return sorted({tool for step in messages for tool in step.metadata.get(ALLOWED_TOOLS, [])})


def branch_allowed_tools(*, message) -> list[str]:
    """Tools the user chose to always allow on this branch (root to `message`)."""
    return tools_allowed(messages=message_path(message_id=message.pk))


def branch_tool_revoke(*, message, tool: str) -> list[str]:
    """Ask again before `tool` on the branch through `message`; returns the
    tools still allowed there. A turn already running keeps the permissions it
    started with: the next turn asks."""
    path = message_path(message_id=message.pk)
    with transaction.atomic():
        for step in path:
            allowed = step.metadata.get(ALLOWED_TOOLS, [])
            if tool in allowed:
                step.metadata = {**step.metadata, ALLOWED_TOOLS: [name for name in allowed if name != tool]}
                step.save(update_fields=["metadata"])
    return tools_allowed(messages=path)


def _flush_data(flush: FlushReport) -> dict:
    return {"artifacts": {"flushed": flush.flushed, "conflicts": flush.conflicts, "failed": flush.failed}}


def _run_finish(*, run: Run, lease: Lease, log: RunEventLog, outcome: engine.TurnOutcome, flush: FlushReport) -> None:
    def write():
        # The terminal event is written first: it is the last write the lease allows.
        with transaction.atomic():
            lease.hold()
            run.metrics = outcome.metrics
            if outcome.status == "waiting_permission":
                # No worker waits for a human: the task ends here and an answer
                # enqueues the run again (permission_answer). The question and
                # the status a page shows it by commit together.
                log.emit(
                    RunEvent.Type.PERMISSION_REQUEST,
                    agent=outcome.pending["agent"],
                    data=engine.permission_request_data(outcome.pending),
                )
                run.status = Run.Status.WAITING_PERMISSION
                run.save(update_fields=["status", "metrics"])
                return
            _answer_keep(message=run.message, text=outcome.response)
            if outcome.status == "cancelled":
                _error_emit(log=log, flush=flush, message=CANCELLED, cancelled=True)
                run.status = Run.Status.CANCELLED
            elif flush.failed:
                # An answer whose artifacts were lost is not complete (seed 000).
                run.error = _error_emit(log=log, flush=flush, message=ARTIFACTS_NOT_SAVED)
                run.status = Run.Status.FAILED
            else:
                log.emit(
                    RunEvent.Type.COMPLETE,
                    data={
                        "response": outcome.response,
                        "duration_ms": outcome.metrics.get("total_duration_ms"),
                        **_flush_data(flush),
                    },
                )
                run.status = Run.Status.COMPLETED
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "finished_at", "metrics", "error"])

    transient_retry(write, what=f"the end of run {run.pk}")


def _error_emit(*, log: RunEventLog, flush: FlushReport, message: str, cancelled: bool = False) -> str:
    """The `error` event of a turn that did not complete, naming the artifacts
    it could not save; returns the message it wrote."""
    if flush.failed:
        message += f" These artifacts could not be saved: {', '.join(sorted(flush.failed))}."
    log.emit(
        RunEvent.Type.ERROR,
        data={"message": message, **({"cancelled": True} if cancelled else {}), **_flush_data(flush)},
    )
    return message


def _run_fail(*, run: Run, lease: Lease, log: RunEventLog, error: str, flush: FlushReport) -> None:
    def write():
        with transaction.atomic():
            lease.hold()
            _run_end_save(run=run, log=log, status=Run.Status.FAILED, error=error, flush=flush)

    transient_retry(write, what=f"the failure of run {run.pk}")


def _run_end_unheld(*, run: Run, log: RunEventLog, status: str, error: str = "") -> None:
    """End a run no worker holds (queued, waiting for permission, or its worker
    dead), inside the caller's transaction: the artifacts its checkpoint
    carries are saved first."""
    artifacts = ArtifactManager(branch=_run_branch(run), run_id=run.pk, on_change=log.artifacts_changed)
    artifacts.restore((run.checkpoint or {}).get("artifacts", []))
    flush = artifacts.flush_all()
    if run.checkpoint:
        run.checkpoint = {**run.checkpoint, "artifacts": artifacts.working_state()}
    _run_end_save(run=run, log=log, status=status, error=error, flush=flush)


def _run_end_save(*, run: Run, log: RunEventLog, status: str, error: str, flush: FlushReport) -> None:
    """A failed or cancelled ending: the answer the page showed is kept, the
    `error` event written (first: a lease allows no write after the status
    changes) and the run's row saved."""
    _answer_keep(message=run.message, text=_answer_shown(run=run))
    if status == Run.Status.CANCELLED:
        _error_emit(log=log, flush=flush, message=CANCELLED, cancelled=True)
    else:
        error = _error_emit(log=log, flush=flush, message=error)
    run.status, run.finished_at, run.error = status, timezone.now(), error
    run.save(update_fields=["status", "finished_at", "error", "checkpoint", "worker_deaths"])


def _answer_shown(*, run: Run) -> str:
    """The answer text the run's page shows now, folded from its event log."""
    view = RunView()
    for event in run.events.order_by("seq"):
        run_view_apply(view, event)
    return view.text.strip()


def _answer_keep(*, message, text: str) -> None:
    message.response = text
    message.response_html = markdown_render(text)
    message.save(update_fields=["response", "response_html"])


# --- what the user does to a run ----------------------------------------------------


class RunStateError(Exception):
    """The run is not in a state that allows this; the message says why."""


class TurnInProgress(RunStateError):
    """Another turn of the conversation is still queued, running or waiting."""


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
        _pending_decide(run=run, request_id=request_id, decision=decision, by=user.get_username(), enqueue=enqueue)
        if decision == engine.ALWAYS:
            message = run.message
            tools = set(message.metadata.get(ALLOWED_TOOLS, [])) | {run.checkpoint["turn"]["pending"]["tool"]}
            message.metadata = {**message.metadata, ALLOWED_TOOLS: sorted(tools)}
            message.save(update_fields=["metadata"])
    return run


def _pending_decide(*, run: Run, request_id: str, decision: str, by: str = "", enqueue: bool = True) -> None:
    """`by`: who answered; nobody when the request expired."""
    turn = (run.checkpoint or {}).get("turn", {})
    pending = turn.get("pending")
    if run.status != Run.Status.WAITING_PERMISSION or not pending or pending["id"] != request_id:
        raise RunStateError("This request is no longer open: it was answered already or the turn moved on.")
    # Logged with the decision when the run resumes, which may be later than the answer.
    answer = {"decision": decision, "decided_by": by, "decided_at": timezone.now().isoformat()}
    run.checkpoint = {**run.checkpoint, "turn": {**turn, "pending": {**pending, **answer}}}
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
    """Cancel the owner's run. A queued or waiting run ends at once, keeping
    what its checkpoint carries; a running one is flagged and its worker stops
    at the next check."""
    with transaction.atomic():
        run = _run_owned_locked(run_id=run_id, user=user)
        _run_cancel(run)
    return run


def runs_cancel_by_staff(*, run_ids: list[int]) -> tuple[list[Run], list[Run]]:
    """An administrator's cancel of any runs, as their owners' would be;
    returns the runs cancelled and those that had ended already."""
    cancelled, ended = [], []
    for run_id in run_ids:
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(pk=run_id).first()
            if run is None:
                continue
            try:
                _run_cancel(run)
            except RunStateError:
                ended.append(run)
            else:
                cancelled.append(run)
    return cancelled, ended


def _run_cancel(run: Run) -> None:
    if not run.is_active:
        raise RunStateError("This turn has already ended.")
    run.cancel_requested = True
    run.save(update_fields=["cancel_requested"])
    if run.status != Run.Status.RUNNING:
        _run_end_unheld(run=run, log=RunEventLog(run=run), status=Run.Status.CANCELLED)


def run_retry(*, run_id: int, user) -> Run:
    """A new run for the message of the owner's failed or cancelled run."""
    with transaction.atomic():
        run = _run_owned_locked(run_id=run_id, user=user)
        if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
            raise RunStateError("Only a failed or cancelled turn can be tried again.")
        if run.message.runs.filter(pk__gt=run.pk).exists():
            raise RunStateError("This turn was tried again already.")
        return run_create(message=run.message)


@dataclass
class ChunkPurge:
    runs: int
    events: int


def run_chunks_purge(*, older_than_days: int, apply: bool = False) -> ChunkPurge:
    """The streamed-text rows (llm_chunk) of runs that ended more than
    `older_than_days` ago: counted, and deleted with `apply`. Each model call's
    whole text stays in its llm_complete event and the answer in its message,
    so the trace loses only when each token arrived."""
    if older_than_days < 0:
        raise ValueError("The number of days cannot be negative.")
    chunks = RunEvent.objects.filter(
        type=RunEvent.Type.LLM_CHUNK, run__finished_at__lt=timezone.now() - timedelta(days=older_than_days)
    ).exclude(run__status__in=Run.ACTIVE_STATUSES)
    report = ChunkPurge(runs=chunks.values("run").distinct().count(), events=chunks.count())
    if apply:
        chunks.delete()
    return report
