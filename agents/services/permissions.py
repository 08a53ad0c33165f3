"""The user's answers to a turn's permission requests, the ones nobody gave in
time, and the tools always allowed on a branch."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from audit.models import AuditEvent
from audit.services import audit_record
from conversations.tree import message_path

from ..engine import permission_unshowable
from ..models import Run
from ..selectors import ALLOWED_TOOLS, tools_allowed
from ..state import ALLOWING, USER_DECISIONS, PermissionDecision, pending_answered, pending_request
from .admission import run_owner_lock, runs_admit, user_lock
from .runs import RunStateError, run_owned_locked


def permission_answer(*, run_id: int, user, request_id: str, decision: str, enqueue: bool = True) -> Run:
    """Record the owner's answer to the run's open permission request and
    enqueue the run to continue (unless the caller runs it itself). A stale or
    repeated answer is refused, and so is an approval of a call too long for
    its prompt to have shown whole, however the answer was sent."""
    with transaction.atomic():
        user_lock(user_id=user.pk)
        run = run_owned_locked(run_id=run_id, user=user)
        if decision not in USER_DECISIONS:
            raise RunStateError(gettext("Answer approve, always or deny."))
        decision = PermissionDecision(decision)
        pending = pending_request(run.checkpoint)
        _pending_decide(run=run, request_id=request_id, decision=decision, by=user.get_username(), enqueue=enqueue)
        audit_record(
            action=AuditEvent.Action.APPROVE if decision in ALLOWING else AuditEvent.Action.DENY,
            obj=run,
            actor=user,
            detail={"tool": pending.tool, "decision": decision.value, "conversation": str(run.message.conversation_id)},
        )
        if decision == PermissionDecision.ALWAYS:
            message = run.message
            tools = set(message.metadata.get(ALLOWED_TOOLS, [])) | {pending_request(run.checkpoint).tool}
            message.metadata = {**message.metadata, ALLOWED_TOOLS: sorted(tools)}
            message.save(update_fields=["metadata"])
    return run


def _pending_decide(
    *, run: Run, request_id: str, decision: PermissionDecision, by: str = "", enqueue: bool = True
) -> None:
    """`by`: who answered; nobody when the request expired."""
    pending = pending_request(run.checkpoint)
    if run.status != Run.Status.WAITING_PERMISSION or pending is None or pending.id != request_id:
        raise RunStateError(gettext("This request is no longer open: it was answered already or the turn moved on."))
    unshowable = permission_unshowable(pending.params)
    if decision in ALLOWING and unshowable:
        raise RunStateError(
            gettext("This call cannot be approved: %(reason)s. Deny it and the agent is told why.")
            % {"reason": unshowable}
        )
    # Logged with the decision when the run resumes, which may be later than the answer.
    run.checkpoint = pending_answered(run.checkpoint, decision=decision, by=by)
    # The pause held no slot: the run goes on when one of its user's is free.
    run.status = Run.Status.WAITING_SLOT if enqueue else Run.Status.QUEUED
    run.save(update_fields=["checkpoint", "status"])
    if enqueue:
        runs_admit(user_id=run.message.conversation.owner_id)


def permissions_expire() -> int:
    """Answer every permission request older than PERMISSION_TIMEOUT as denied."""
    expired = 0
    now = timezone.now()
    for run_id in Run.objects.filter(status=Run.Status.WAITING_PERMISSION).values_list("pk", flat=True):
        with transaction.atomic():
            run_owner_lock(run_id=run_id)
            run = Run.objects.select_for_update().get(pk=run_id)
            pending = pending_request(run.checkpoint)
            if run.status != Run.Status.WAITING_PERMISSION or pending is None or not pending.expires_at:
                continue
            if datetime.fromisoformat(pending.expires_at) > now:
                continue
            _pending_decide(run=run, request_id=pending.id, decision=PermissionDecision.EXPIRED)
            expired += 1
    return expired


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
