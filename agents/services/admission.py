"""Admission: which of a user's turns hold a worker now.

At most TURNS_PER_USER turns of a user are admitted (queued with their task,
or running). A turn beyond them waits (Run.Status.WAITING_SLOT) with no task,
and its page says how many of the user's own waiting turns are ahead of it;
when one of the user's turns ends or pauses for permission (a paused turn
holds no worker, so no slot), the oldest waiting one is admitted. Fair order
between users follows: nobody has more than the limit in django-q2's queue,
so another person's turn waits behind at most that many of anyone's.

Admission is decided under a lock on the user's row (Postgres; on SQLite the
transaction's write lock, taken at BEGIN, serialises it), so several web and
worker processes never admit past the limit. Whoever locks a run in a
transaction that may admit (ending a run, answering or expiring a permission
question, recovering a dead worker's run, a staff cancel) locks its owner
first (`user_lock`, `run_owner_lock`): admission writes to waiting runs under
the owner's lock, and the other order deadlocks on Postgres.

It is called where a run is created or answered (agents.services.runs,
.permissions), where one ends or pauses (.ending, .execution), and by the
sweep (.recovery), which admits what an ending left waiting (a process that
died in between)."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import OuterRef, Q, Subquery
from django_q.tasks import async_task

from ..events import RunEventLog
from ..models import Run, RunEvent

TASK = "agents.tasks.run_turn"


def run_enqueue(*, run: Run, reason: str = "") -> None:
    """Hand the run to a worker once the caller's transaction commits.
    `reason` (recover, resume) tells its task from the run's first one."""
    task_name = f"run-{run.pk}-{reason}" if reason else f"run-{run.pk}"
    transaction.on_commit(lambda: async_task(TASK, run.pk, task_name=task_name))


def user_lock(*, user_id: int) -> None:
    """Lock the user's row until the caller's transaction ends: admissions of
    the user's turns happen one at a time."""
    list(get_user_model().objects.select_for_update().filter(pk=user_id).values_list("pk", flat=True))


def run_owner_lock(*, run_id: int) -> None:
    """Lock the owner of the run, before the run itself is locked or written:
    ending a run admits its owner's next one, under the owner's lock."""
    owner_id = Run.objects.filter(pk=run_id).values_list("message__conversation__owner_id", flat=True).first()
    if owner_id is not None:
        user_lock(user_id=owner_id)


def runs_admit(*, user_id: int) -> list[int]:
    """Admit the user's waiting runs, oldest first, into the slots free, and
    tell the ones still waiting their place when it changed. Returns the ids
    admitted. Inside the caller's transaction, or one of its own."""
    with transaction.atomic():
        user_lock(user_id=user_id)
        runs = Run.objects.filter(message__conversation__owner_id=user_id)
        waiting = list(
            runs.filter(status=Run.Status.WAITING_SLOT).select_related("message").order_by("created_at", "id")
        )
        if not waiting:
            return []
        limit = settings.TURNS_PER_USER
        free = limit - runs.filter(status__in=Run.ADMITTED_STATUSES).count() if limit > 0 else len(waiting)
        admitted, still = waiting[: max(free, 0)], waiting[max(free, 0) :]
        announced = _places_announced(run_ids=[run.pk for run in waiting])
        for run in admitted:
            run.status = Run.Status.QUEUED
            run.save(update_fields=["status"])
            # A run admitted as it was asked was never told it waits.
            if run.pk in announced:
                RunEventLog(run=run).emit(RunEvent.Type.METADATA, data={"run_id": run.pk, "admitted": True})
            run_enqueue(run=run, reason="resume" if run.checkpoint else "")
        for ahead, run in enumerate(still):
            if announced.get(run.pk) != ahead:
                RunEventLog(run=run).emit(RunEvent.Type.METADATA, data={"run_id": run.pk, "ahead": ahead})
    return [run.pk for run in admitted]


def _places_announced(*, run_ids: list[int]) -> dict[int, int]:
    """The place each of these waiting runs was last told (its newest
    metadata event's `ahead`), for those told one."""
    metadata = RunEvent.objects.filter(type=RunEvent.Type.METADATA)
    newest = metadata.filter(run_id=OuterRef("run_id")).order_by("-seq").values("seq")[:1]
    rows = metadata.filter(run_id__in=run_ids, seq=Subquery(newest)).values_list("run_id", "data")
    return {run_id: data["ahead"] for run_id, data in rows if isinstance(data, dict) and "ahead" in data}


def runs_admit_all() -> int:
    """The sweep's: admit every user's waiting runs that free slots allow, as
    an ending would have (its process may have died before it could).
    Returns how many were admitted."""
    users = Run.objects.filter(status=Run.Status.WAITING_SLOT).values_list("message__conversation__owner_id", flat=True)
    return sum(len(runs_admit(user_id=user_id)) for user_id in sorted(set(users)))


def waiting_place(*, run: Run) -> int:
    """A waiting run's place among its user's waiting runs (0: next)."""
    earlier = Q(created_at__lt=run.created_at) | Q(created_at=run.created_at, pk__lt=run.pk)
    waiting = Run.objects.filter(
        status=Run.Status.WAITING_SLOT, message__conversation__owner_id=run.message.conversation.owner_id
    )
    return waiting.filter(earlier).count()
