"""The sweep: runs whose worker died, found by a stale heartbeat or a process
of this host that is gone, queued again to resume once from their checkpoint
and failed the second time; and permission requests left unanswered, expired.
It never executes a turn: a worker does (`agents.services.execution`, which
asks `run_recover_dead` about a run delivered again that is not queued)."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from artifactflow import metrics
from artifactflow.db import TRANSIENT_ERRORS

from ..events import RunEventLog
from ..lease import HOST, worker_gone
from ..models import Run, RunEvent
from .admission import run_enqueue, run_owner_lock, runs_admit_all
from .ending import run_end_unheld
from .permissions import permissions_expire

logger = logging.getLogger(__name__)

# Stored in English on the run and translated as a page shows it (agents.projection.stored_text).
WORKER_DIED = gettext_noop("The worker running this turn stopped twice. Ask again to retry.")
NOT_RECOVERED = gettext_noop(
    "The worker running this turn stopped, and the turn could not be resumed. It has been logged."
)
ARTIFACTS_NOT_RECOVERED = gettext_noop("The artifacts it was writing could not be read back to be saved.")
# The two together, one message to translate.
NOT_RECOVERED_NOR_ARTIFACTS = gettext_noop(
    "The worker running this turn stopped, and the turn could not be resumed. It has been logged. "
    "The artifacts it was writing could not be read back to be saved."
)
# A run whose worker dies is resumed once from its checkpoint; a second death
# fails it. Claims after a permission answer are not deaths.
WORKER_DEATHS_RESUMED = 1


def _worker_dead(run: Run) -> bool:
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE)
    return run.heartbeat_at is None or run.heartbeat_at < cutoff or worker_gone(run.worker)


def _running_locked(*, run_id: int) -> Run | None:
    """The run, locked until the transaction ends, if it is still running."""
    return (
        Run.objects.select_for_update()
        .select_related("message__conversation")
        .filter(pk=run_id, status=Run.Status.RUNNING)
        .first()
    )


def run_recover_dead(*, run_id: int) -> Run | None:
    """A running run whose worker died is queued again to continue from its
    last checkpoint — once; the second death fails it, its artifacts saved and
    the answer the page showed kept. Returns the run when it was recovered
    either way."""
    with transaction.atomic():
        run_owner_lock(run_id=run_id)
        run = _running_locked(run_id=run_id)
        if run is None or not _worker_dead(run):
            return None
        run.worker_deaths += 1
        log = RunEventLog(run=run)
        if run.worker_deaths > WORKER_DEATHS_RESUMED:
            run_end_unheld(run=run, log=log, status=Run.Status.FAILED, error=WORKER_DIED)
            return run
        run.status, run.worker = Run.Status.QUEUED, ""
        run.save(update_fields=["status", "worker", "worker_deaths"])
        # The step the dead worker was in is done again; the page says so now.
        log.emit(RunEvent.Type.METADATA, data={"run_id": run.pk, "model": run.model, "resumed": True})
        run_enqueue(run=run, reason="recover")
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
    recovered = 0
    # Each run on its own: one that cannot be recovered must not leave the
    # others after it running for good.
    for run_id in sorted(dead):
        try:
            run = run_recover_dead(run_id=run_id)
        except TRANSIENT_ERRORS:
            # The database, not the run: the next sweep tries it again.
            logger.exception("The database failed while run %s was recovered; the next sweep tries again", run_id)
            continue
        except Exception:
            logger.exception("Run %s could not be recovered; it ends failed", run_id)
            run = _run_fail_unrecovered(run_id=run_id)
        recovered += run is not None
    return recovered


def _run_fail_unrecovered(*, run_id: int) -> Run | None:
    """End failed, as any run its worker left is ended (run_end_unheld), a
    dead run whose recovery raised. When its checkpoint's artifacts are what
    cannot be read, it ends without saving them; they stay in its checkpoint
    for an administrator. Returns None when even that failed (logged): the
    next sweep tries again."""
    try:
        return _run_end_failed(run_id=run_id, error=NOT_RECOVERED, with_artifacts=True)
    except Exception:
        logger.exception("Run %s could not be ended with its artifacts; it ends without them", run_id)
    try:
        return _run_end_failed(run_id=run_id, error=NOT_RECOVERED_NOR_ARTIFACTS, with_artifacts=False)
    except Exception:
        logger.exception("Run %s could not be ended failed; the next sweep tries again", run_id)
        return None


def _run_end_failed(*, run_id: int, error: str, with_artifacts: bool) -> Run | None:
    with transaction.atomic():
        run_owner_lock(run_id=run_id)
        run = _running_locked(run_id=run_id)
        if run is None:
            return None
        run.worker_deaths += 1
        # run_end_unheld saves what the checkpoint carries: without artifacts,
        # it is shown none, and they are put back once it has ended the run.
        carried = (run.checkpoint or {}).get("artifacts") or []
        if not with_artifacts and carried:
            run.checkpoint = {**run.checkpoint, "artifacts": []}
        run_end_unheld(run=run, log=RunEventLog(run=run), status=Run.Status.FAILED, error=error)
        if not with_artifacts and carried:
            run.checkpoint = {**run.checkpoint, "artifacts": carried}
            run.save(update_fields=["checkpoint"])
    return run


def runs_sweep() -> dict:
    """The periodic check (a django-q2 schedule, and each worker as it starts):
    recover runs whose worker died, expire unanswered permission requests and
    admit waiting runs that an ending left waiting. Waiting runs hold no task
    and are never queued here but by admission."""
    recovered = runs_recover()
    metrics.sweep_recovered_count(runs=recovered)
    return {"recovered": recovered, "expired": permissions_expire(), "admitted": runs_admit_all()}
