"""Runs whose worker died: found by a stale heartbeat or a process of this
host that is gone, resumed once from their checkpoint, failed the second time;
and the periodic sweep that looks for them."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..events import RunEventLog
from ..lease import HOST, worker_gone
from ..models import Run, RunEvent
from .permissions import permissions_expire
from .runs import run_claim, run_claimed_execute, run_end_unheld, run_enqueue

WORKER_DIED = "The worker running this turn stopped twice. Ask again to retry."
# A run whose worker dies is resumed once from its checkpoint; a second death
# fails it. Claims after a permission answer are not deaths.
WORKER_DEATHS_RESUMED = 1


def run_deliver(*, run_id: int) -> Run | None:
    """A worker's task for the run: execute it (run_claimed_execute). A second
    delivery of the task finds the run not queued: done, or its worker died,
    and then it is queued again, with a task of its own."""
    run = run_claim(run_id=run_id)
    if run is None:
        _run_recover_dead(run_id=run_id)
        return None
    return run_claimed_execute(run=run)


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
    return sum(1 for run_id in sorted(dead) if _run_recover_dead(run_id=run_id) is not None)


def runs_sweep() -> dict:
    """The periodic check (a django-q2 schedule, and each worker as it starts):
    recover runs whose worker died and expire unanswered permission requests."""
    return {"recovered": runs_recover(), "expired": permissions_expire()}
