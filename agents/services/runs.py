"""What people do to runs: a user's turn created and handed to a worker (its
task enqueued), the owner's cancel and retry, and an administrator's cancel.
Nothing here executes a turn: a worker does (`agents.services.execution`); a run no worker holds is ended here through
`agents.services.ending`."""

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from conversations.models import Conversation, Message

from ..budgets import budget_refusal
from ..events import RunEventLog
from ..models import Run
from .admission import run_owner_lock, runs_admit, user_lock
from .ending import run_end_unheld

TURN_IN_PROGRESS = gettext_noop(
    "A turn is still running in this conversation. Stop it, or wait for it to finish, then send."
)


class RunStateError(Exception):
    """The run is not in a state that allows this; the message says why."""


class TurnInProgress(RunStateError):
    """Another turn of the conversation is still queued, running or waiting."""


class BudgetSpent(RunStateError):
    """The user's turns have spent today's token budget."""


def run_create(*, message, enqueue: bool = True, retry_of: Run | None = None, schedule=None) -> Run:
    """A run for `message`, admitted (queued, its task enqueued once the
    caller's transaction commits) or waiting for one of its user's turns to
    end (agents.services.admission). Without `enqueue` it is queued for the
    caller to execute itself.

    One turn at a time per conversation: turns share the conversation's
    artifacts, so a second one would race the first on them. Refused too
    (BudgetSpent) once its user's token budget for today is spent."""
    owner = message.conversation.owner
    refusal = budget_refusal(user=owner)
    if refusal:
        raise BudgetSpent(refusal)
    with transaction.atomic():
        # A write first, so that two requests serialise here on SQLite (which
        # has no row locks) as on Postgres, and the second sees the first's run.
        Conversation.objects.filter(pk=message.conversation_id).update(updated_at=timezone.now())
        if Run.objects.filter(
            message__conversation_id=message.conversation_id, status__in=Run.ACTIVE_STATUSES
        ).exists():
            raise TurnInProgress(gettext(TURN_IN_PROGRESS))
        run = Run.objects.create(
            message=message,
            retry_of=retry_of,
            schedule=schedule,
            lead_model=message.conversation.lead_model,
            status=Run.Status.WAITING_SLOT if enqueue else Run.Status.QUEUED,
        )
        if enqueue:
            runs_admit(user_id=owner.pk)
            run.refresh_from_db(fields=["status"])
    return run


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
        user_lock(user_id=user.pk)
        run = run_owned_locked(run_id=run_id, user=user)
        _run_cancel(run)
    return run


def runs_cancel_by_staff(*, run_ids: list[int]) -> tuple[list[Run], list[Run]]:
    """An administrator's cancel of any runs, as their owners' would be;
    returns the runs cancelled and those that had ended already."""
    cancelled, ended = [], []
    for run_id in run_ids:
        with transaction.atomic():
            run_owner_lock(run_id=run_id)
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
