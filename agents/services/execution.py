"""A worker's side of a run: its task delivered (`run_start`, the django-q2
task's, which runs many turns at once, each in a thread), the run claimed under a new attempt number (its lease),
its turn executed from where it stands, and its end written under that lease:
completed, waiting for the user's permission, cancelled or failed. A delivery
that finds the run not queued is handed to `agents.services.recovery`, which
checks whether its worker died; nothing else executes a turn."""

import dataclasses
import logging
import threading
import time

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_noop

from artifactflow import metrics
from artifactflow.db import TRANSIENT_ERRORS, connection_release, transient_retry
from artifacts.manager import ArtifactManager, FlushReport

from .. import engine
from ..budgets import BudgetSpent
from ..config import LEAD_AGENT
from ..events import RunEventLog
from ..lease import Heartbeat, Lease, LeaseLost, worker_name
from ..llm.base import ModelError
from ..llm.config import AgentModels, models_from_settings
from ..models import Run, RunEvent
from ..selectors import branch_allowed_tools
from ..state import OutcomeStatus, TurnState, checkpoint_new, checkpoint_state
from ..titling import title_propose
from .admission import run_owner_lock, runs_admit
from .changes import changes_since_last_run
from .citations import citations_check, citations_keep
from .ending import CANCELLED, answer_keep, error_emit, flush_data, run_branch, run_end_save
from .recovery import run_recover_dead

logger = logging.getLogger(__name__)

# Stored in English on the run and translated as a page shows it (agents.projection.stored_text).
ARTIFACTS_NOT_SAVED = gettext_noop(
    "The answer is complete, but not all its artifacts were saved. Ask again to have them written."
)
INTERNAL_ERROR = gettext_noop("An internal error stopped this turn. It has been logged.")


def run_start(*, run_id: int) -> int:
    """The django-q2 task's work: this process runs the run's turn and, while
    it has turns, every other queued run it can take, up to
    RUN_TURNS_PER_WORKER at once, each in a thread of its own (a turn mostly
    waits on the model). Returns how many turns it ran, once it has none left
    and finds none queued, or once it has taken turns for RUN_TAKE_SECONDS
    (then it finishes those it has: django-q2's timeout, which would kill the
    process, is set beyond both). Other runs' tasks, delivered to another
    process meanwhile, find them taken and end at once.

    Why the task holds its process rather than hand each turn to a thread and
    return: django-q2's worker waits for its next task holding its task
    queue's lock, and a process killed there (SIGKILL, the OOM killer) would
    leave the lock held and the whole cluster deaf. A process holding turns
    is here instead, and its turns are recovered by the sweep as any dead
    worker's. A second delivery of a task whose run is not queued checks
    whether its worker died (run_recover_dead)."""
    first = run_claim(run_id=run_id)
    if first is None:
        run_recover_dead(run_id=run_id)
        return 0
    turns = [_run_thread(first)]
    taking_until = time.monotonic() + settings.RUN_TAKE_SECONDS
    idle_since = None
    while True:
        running = [thread for thread in turns if thread.is_alive()]
        free = settings.RUN_TURNS_PER_WORKER - len(running)
        taken = _runs_take(limit=free) if free > 0 and time.monotonic() < taking_until else []
        turns += [_run_thread(run) for run in taken]
        connection_release()
        if running or taken:
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= RUNNER_IDLE_SECONDS:
            return len(turns)
        time.sleep(RUNNER_POLL_SECONDS)


# How often a process with turns looks for queued runs, and how long it
# stays with none before it goes back to django-q2 for its next task.
RUNNER_POLL_SECONDS = 0.2
RUNNER_IDLE_SECONDS = 1.0


def _runs_take(*, limit: int) -> list[Run]:
    """Up to `limit` queued runs, oldest first, claimed for this process."""
    queued = Run.objects.filter(status=Run.Status.QUEUED).order_by("pk").values_list("pk", flat=True)[:limit]
    return runs_claim(run_ids=list(queued))


def _run_thread(run: Run) -> threading.Thread:
    thread = threading.Thread(target=_run_in_thread, kwargs={"run": run}, name=f"turn-{run.pk}", daemon=True)
    thread.start()
    return thread


def _run_in_thread(*, run: Run) -> None:
    try:
        run_claimed_execute(run=run)
    except Exception:
        logger.exception("Run %s stopped its worker thread", run.pk)
    finally:
        # Each turn's thread has its own connection; it goes with the turn.
        connection.close()


def run_claim(*, run_id: int) -> Run | None:
    """Take a queued run for this worker under a new attempt number (its
    lease). Returns None when it is not queued any more (a second delivery of
    the same task, or a run already finished)."""
    claimed = runs_claim(run_ids=[run_id])
    return claimed[0] if claimed else None


def runs_claim(*, run_ids: list[int]) -> list[Run]:
    """Take those of these runs that are still queued for this worker, each
    under a new attempt number, in one write and one read: at 50 people a
    poll finds many, and on SQLite each write waits its turn for the file.
    Another worker's claim of some of them meanwhile leaves those out: the
    update only takes a queued run, and the read only what this one took."""
    if not run_ids:
        return []
    now, worker = timezone.now(), worker_name()
    claimed = Run.objects.filter(pk__in=run_ids, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING,
        attempts=F("attempts") + 1,
        started_at=now,
        heartbeat_at=now,
        worker=worker,
    )
    if not claimed:
        return []
    taken = Run.objects.select_related("message__conversation").filter(
        pk__in=run_ids, status=Run.Status.RUNNING, worker=worker, started_at=now
    )
    return list(taken.order_by("pk"))


def run_execute(*, run_id: int, on_event=None) -> Run | None:
    """Claim the run and execute its turn in this thread (run_claimed_execute).
    Returns None when it was not queued: a worker's task delivered again is
    run_start's."""
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
        branch=run_branch(run),
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
    if run.finished_at is not None and run.started_at is not None:
        metrics.turn_observe(status=run.status, seconds=(run.finished_at - run.started_at).total_seconds())
    if run.status == Run.Status.COMPLETED:
        # After the turn's end is stored: the title's call can fail, it cannot fail the turn.
        title_propose(run=run)
    return run


def _run_drive(*, run: Run, lease: Lease, log: RunEventLog, artifacts: ArtifactManager, heartbeat: Heartbeat) -> None:
    state = None
    try:
        models = models_from_settings(lead=run.lead_model)
        if run.checkpoint:
            state = checkpoint_state(run.checkpoint)
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
    except (ModelError, ImproperlyConfigured, BudgetSpent) as exc:
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


def _run_interrupted(*, run: Run, heartbeat: Heartbeat) -> bool:
    """The engine's check between steps and while streaming: True when the
    user cancelled; LeaseLost when the run is not this worker's any more.
    Both are read from the process's watcher (lease.Heartbeat): no query."""
    if heartbeat.lost:
        raise LeaseLost(f"run {run.pk} was taken over")
    return heartbeat.cancelled


def _run_start(*, run: Run, models: AgentModels, log: RunEventLog) -> TurnState:
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
    allowed = branch_allowed_tools(message=run.message)
    if run.schedule_id is not None:
        # The tools its owner allowed the schedule to run unattended.
        allowed += [name for name in run.schedule.allowed_tools if name not in allowed]
    return engine.turn_state_new(message=run.message, allowed=allowed)


def _run_checkpoint(*, run: Run, lease: Lease, state: TurnState, artifacts: ArtifactManager) -> None:
    run.checkpoint = checkpoint_new(state=state, artifacts=artifacts.working_state())

    def write():
        with transaction.atomic():
            lease.hold(checkpoint=run.checkpoint)

    transient_retry(write, what=f"the checkpoint of run {run.pk}")
    # Working copies the live cache missed while it was down reach the pane now.
    artifacts.live_republish()
    connection_release()


def _run_finish(*, run: Run, lease: Lease, log: RunEventLog, outcome: engine.TurnOutcome, flush: FlushReport) -> None:
    citations = None
    if run.schedule_id is not None and outcome.status == OutcomeStatus.COMPLETED and not flush.failed:
        # A scheduled answer opens with what changed since the schedule's last run.
        prefix = changes_since_last_run(run=run, skipped=outcome.skipped)
        outcome = dataclasses.replace(outcome, response=prefix + outcome.response)
    if outcome.status == OutcomeStatus.COMPLETED and not flush.failed:
        # Read before the end's transaction, which may hold SQLite's one writer's lock.
        citations = citations_check(run=run, answer=outcome.response)

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
            answer_keep(message=run.message, text=outcome.response)
            if outcome.status == OutcomeStatus.CANCELLED:
                error_emit(log=log, flush=flush, message=CANCELLED, cancelled=True)
                run.status = Run.Status.CANCELLED
            elif flush.failed:
                # An answer whose artifacts were lost is not complete (seed 000).
                run.error = error_emit(log=log, flush=flush, message=ARTIFACTS_NOT_SAVED)
                run.status = Run.Status.FAILED
            else:
                citations_keep(message=run.message, check=citations)
                if citations and any(item["where"] for item in citations["missing"]):
                    # Open panes were shown the reports before the check: shown again, they mark what it did not find.
                    log.artifacts_changed()
                log.emit(
                    RunEvent.Type.COMPLETE,
                    data={
                        "response": outcome.response,
                        "duration_ms": outcome.metrics.get("total_duration_ms"),
                        **flush_data(flush),
                    },
                )
                run.status = Run.Status.COMPLETED
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "finished_at", "metrics", "error"])

    transient_retry(write, what=f"the end of run {run.pk}")
    runs_admit(user_id=run.message.conversation.owner_id)


def _run_fail(
    *, run: Run, lease: Lease, log: RunEventLog, error: str, flush: FlushReport, state: TurnState | None
) -> None:
    # The model calls and tools of a failed turn cost as much as a finished one's.
    if state is not None:
        run.metrics = engine.turn_metrics(state)

    def write():
        with transaction.atomic():
            # Before the lease's lock on the run: its ending admits the owner's next turn.
            run_owner_lock(run_id=run.pk)
            lease.hold()
            run_end_save(run=run, log=log, status=Run.Status.FAILED, error=error, flush=flush)

    transient_retry(write, what=f"the failure of run {run.pk}")
