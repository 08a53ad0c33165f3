"""Run lifecycle: create and enqueue, claim, execute, finish; the owner's
cancel and retry, and an administrator's cancel and purge."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop
from django_q.tasks import async_task

from artifactflow.db import TRANSIENT_ERRORS, transient_retry
from artifactflow.markdown import markdown_render
from artifacts.branches import Branch, branch_at
from artifacts.manager import ArtifactManager, FlushReport
from artifacts.models import ArtifactSession
from conversations.models import Conversation, Message

from .. import engine
from ..config import LEAD_AGENT
from ..events import RunEventLog
from ..lease import Heartbeat, Lease, LeaseLost, worker_name
from ..llm.base import ModelError
from ..llm.config import AgentModels, models_from_settings
from ..models import Run, RunEvent
from ..selectors import RunView, branch_allowed_tools, run_view_apply
from ..state import OutcomeStatus

logger = logging.getLogger(__name__)

TASK = "agents.tasks.run_turn"
# Stored in English on the run and translated as a page shows it (agents.selectors.stored_text).
CANCELLED = gettext_noop("Cancelled.")
ARTIFACTS_NOT_SAVED = gettext_noop(
    "The answer is complete, but not all its artifacts were saved. Ask again to have them written."
)
INTERNAL_ERROR = gettext_noop("An internal error stopped this turn. It has been logged.")
TURN_IN_PROGRESS = gettext_noop(
    "A turn is still running in this conversation. Stop it, or wait for it to finish, then send."
)


class RunStateError(Exception):
    """The run is not in a state that allows this; the message says why."""


class TurnInProgress(RunStateError):
    """Another turn of the conversation is still queued, running or waiting."""


def run_enqueue(*, run: Run, reason: str = "") -> None:
    """Hand the run to a worker once the caller's transaction commits.
    `reason` (recover, resume) tells its task from the run's first one."""
    task_name = f"run-{run.pk}-{reason}" if reason else f"run-{run.pk}"
    transaction.on_commit(lambda: async_task(TASK, run.pk, task_name=task_name))


def run_create(*, message, enqueue: bool = True, retry_of: Run | None = None) -> Run:
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
            raise TurnInProgress(gettext(TURN_IN_PROGRESS))
        run = Run.objects.create(message=message, retry_of=retry_of, lead_model=message.conversation.lead_model)
    if enqueue:
        run_enqueue(run=run)
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


def run_execute(*, run_id: int, on_event=None) -> Run | None:
    """Claim the run and execute its turn (run_claimed_execute). Returns None
    when it was not queued: a worker's task delivered again is
    agents.services.recovery.run_deliver's."""
    run = run_claim(run_id=run_id)
    if run is None:
        return None
    return run_claimed_execute(run=run, on_event=on_event)


def run_claimed_execute(*, run: Run, on_event=None) -> Run | None:
    """Execute a claimed run's turn from where it stands until it completes,
    waits for the user's permission, is cancelled or fails with an `error`
    event that says why. Returns the run, or None when this worker lost the
    run to another."""
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
    state = None
    try:
        models = models_from_settings(lead=run.lead_model)
        if run.checkpoint:
            state = engine.checkpoint_state(run.checkpoint)
            artifacts.restore(run.checkpoint.get("artifacts", []))
        else:
            state = _run_start(run=run, models=models, log=log)
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
        _run_fail(run=run, lease=lease, log=log, error=str(exc), flush=artifacts.flush_all(), state=state)
    except Exception:
        logger.exception("Run %s failed", run.pk)
        _run_fail(run=run, lease=lease, log=log, error=INTERNAL_ERROR, flush=artifacts.flush_all(), state=state)
    else:
        # However the loop ended, the turn's artifacts are saved first; the
        # checkpoint then no longer carries them. A turn paused for the user's
        # permission keeps them in the checkpoint instead: one version per
        # artifact per turn, paused or not (seed 000).
        flush = FlushReport() if outcome.status == OutcomeStatus.WAITING_PERMISSION else artifacts.flush_all()
        _run_checkpoint(run=run, lease=lease, state=state, artifacts=artifacts)
        _run_finish(run=run, lease=lease, log=log, outcome=outcome, flush=flush)


def _run_branch(run: Run) -> Branch:
    """The artifacts a turn works on: its message's branch. A conversation
    made outside the portal's services (by a script) may lack its artifact
    session: it gets it here, or its runs could never be executed or ended."""
    conversation = run.message.conversation
    try:
        session = conversation.artifact_session
    except ArtifactSession.DoesNotExist:
        session, _ = ArtifactSession.objects.get_or_create(conversation=conversation)
    return branch_at(session=session, message_id=run.message_id)


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


def _run_start(*, run: Run, models: AgentModels, log: RunEventLog) -> engine.TurnState:
    # The lead writes the answer: its model is the one the answer names.
    model = models.for_agent(LEAD_AGENT)
    run.model, run.model_label = model.name, models.lead_label
    run.save(update_fields=["model", "model_label"])
    log.emit(
        RunEvent.Type.METADATA,
        data={
            "conversation_id": str(run.message.conversation_id),
            "message_id": run.message_id,
            "run_id": run.pk,
            "model": model.name,
            **({"model_label": models.lead_label} if models.lead_label else {}),
            "demo": model.demo,
        },
    )
    return engine.turn_state_new(message=run.message, allowed=branch_allowed_tools(message=run.message))


def _run_checkpoint(*, run: Run, lease: Lease, state: engine.TurnState, artifacts: ArtifactManager) -> None:
    run.checkpoint = engine.checkpoint_new(state=state, artifacts=artifacts.working_state())

    def write():
        with transaction.atomic():
            lease.hold(checkpoint=run.checkpoint)

    transient_retry(write, what=f"the checkpoint of run {run.pk}")
    # Working copies the live cache missed while it was down reach the pane now.
    artifacts.live_republish()


def _flush_data(flush: FlushReport) -> dict:
    return {
        "artifacts": {
            "flushed": flush.flushed,
            "conflicts": flush.conflicts,
            "dropped": flush.dropped,
            "failed": flush.failed,
        }
    }


def _run_finish(*, run: Run, lease: Lease, log: RunEventLog, outcome: engine.TurnOutcome, flush: FlushReport) -> None:
    def write():
        # The terminal event is written first: it is the last write the lease allows.
        with transaction.atomic():
            lease.hold()
            run.metrics = outcome.metrics
            if outcome.status == OutcomeStatus.WAITING_PERMISSION:
                # No worker waits for a human: the task ends here and an answer
                # enqueues the run again (permission_answer). The question and
                # the status a page shows it by commit together.
                log.emit(
                    RunEvent.Type.PERMISSION_REQUEST,
                    agent=outcome.pending.agent,
                    data=engine.permission_request_data(outcome.pending),
                )
                run.status = Run.Status.WAITING_PERMISSION
                run.save(update_fields=["status", "metrics"])
                return
            _answer_keep(message=run.message, text=outcome.response)
            if outcome.status == OutcomeStatus.CANCELLED:
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


def _run_fail(
    *, run: Run, lease: Lease, log: RunEventLog, error: str, flush: FlushReport, state: engine.TurnState | None
) -> None:
    # The model calls and tools of a failed turn cost as much as a finished one's.
    if state is not None:
        run.metrics = engine.turn_metrics(state)

    def write():
        with transaction.atomic():
            lease.hold()
            _run_end_save(run=run, log=log, status=Run.Status.FAILED, error=error, flush=flush)

    transient_retry(write, what=f"the failure of run {run.pk}")


def run_end_unheld(*, run: Run, log: RunEventLog, status: str, error: str = "") -> None:
    """End a run no worker holds (queued, waiting for permission, or its worker
    dead), inside the caller's transaction: the artifacts its checkpoint
    carries are saved first."""
    artifacts = ArtifactManager(branch=_run_branch(run), run_id=run.pk, on_change=log.artifacts_changed)
    artifacts.restore((run.checkpoint or {}).get("artifacts", []))
    flush = artifacts.flush_all()
    if run.checkpoint:
        run.checkpoint = {**run.checkpoint, "artifacts": artifacts.working_state()}
        run.metrics = engine.turn_metrics(engine.checkpoint_state(run.checkpoint))
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
    run.save(update_fields=["status", "finished_at", "error", "checkpoint", "worker_deaths", "metrics"])


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


def run_owned_locked(*, run_id: int, user) -> Run:
    """The user's run, locked for the caller's transaction; Run.DoesNotExist
    when it is not theirs."""
    run = Run.objects.select_for_update().filter(pk=run_id, message__conversation__owner=user).first()
    if run is None:
        raise Run.DoesNotExist
    return run


def run_cancel(*, run_id: int, user) -> Run:
    """Cancel the owner's run. A queued or waiting run ends at once, keeping
    what its checkpoint carries; a running one is flagged and its worker stops
    at the next check."""
    with transaction.atomic():
        run = run_owned_locked(run_id=run_id, user=user)
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
        raise RunStateError(gettext("This turn has already ended."))
    run.cancel_requested = True
    run.save(update_fields=["cancel_requested"])
    if run.status != Run.Status.RUNNING:
        run_end_unheld(run=run, log=RunEventLog(run=run), status=Run.Status.CANCELLED)


def run_retry(*, run_id: int, user) -> Run:
    """A new run for the question of the owner's failed or cancelled run.

    The branch's newest turn is answered again at its own message. A turn
    with later turns below it is tried again as a new branch beside it, as
    *Ask again* does, and the page shows that branch: a run at the old message
    saves its versions on the later turns' path, so their branch would see
    them in place of its own (docs/artifacts.md). Whether it branched is
    whether the new run's message is another."""
    with transaction.atomic():
        run = run_owned_locked(run_id=run_id, user=user)
        if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
            raise RunStateError(gettext("Only a failed or cancelled turn can be tried again."))
        # Runs from before retry_of was recorded were retried at their message.
        if run.retries.exists() or run.message.runs.filter(pk__gt=run.pk).exists():
            raise RunStateError(gettext("This turn was tried again already."))
        message = run.message
        if message.children.exists():
            message = Message.objects.create(
                conversation_id=message.conversation_id, parent_id=message.parent_id, content=message.content
            )
            Conversation.objects.filter(pk=message.conversation_id).update(active_branch=message)
        return run_create(message=message, retry_of=run)


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
