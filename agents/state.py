"""The engine's run state in the terms the rest of the app reads it: how a
turn's execution ended, the answers to a permission request, and the request
a turn waits on, read from the run's checkpoint only here and in the engine.

A module of its own that imports nothing of the app, so that the selectors
and the step fold, which the engine's own imports reach, can use it. The
values are the strings stored in checkpoints, events and forms.
"""

from dataclasses import dataclass, fields
from enum import StrEnum

from django.utils import timezone

# The engine's part of a run's checkpoint (agents.engine.TurnState); the
# other part is the working copies of the turn's artifacts.
TURN = "turn"


class OutcomeStatus(StrEnum):
    """How agents.engine.turn_execute returned."""

    COMPLETED = "completed"
    WAITING_PERMISSION = "waiting_permission"
    CANCELLED = "cancelled"


class PermissionDecision(StrEnum):
    """The answer to a permission request; EXPIRED is nobody's, given when it timed out."""

    APPROVE = "approve"
    ALWAYS = "always"
    DENY = "deny"
    EXPIRED = "expired"


# What the user may answer.
USER_DECISIONS = (PermissionDecision.APPROVE, PermissionDecision.ALWAYS, PermissionDecision.DENY)
# The answers that let the tool call run.
ALLOWING = (PermissionDecision.APPROVE, PermissionDecision.ALWAYS)
# What the engine tells an agent whose call a person refused, or nobody
# answered in time (the demo model reads these back to the person).
REFUSED_MESSAGES = {
    PermissionDecision.DENY: "The user denied this call.",
    PermissionDecision.EXPIRED: "Nobody answered the request in time, so it counts as denied.",
}


@dataclass(frozen=True)
class PendingRequest:
    """The tool call a turn waits on the user's permission for."""

    id: str
    agent: str
    tool: str
    params: dict
    expires_at: str = ""
    call_id: str = ""
    # Set once answered; the engine logs the answer when the turn resumes.
    decision: PermissionDecision | None = None
    decided_by: str = ""
    decided_at: str = ""

    @classmethod
    def from_checkpoint(cls, data: dict) -> "PendingRequest":
        known = {f.name for f in fields(cls)}
        request = {name: value for name, value in data.items() if name in known}
        if request.get("decision") is not None:
            request["decision"] = PermissionDecision(request["decision"])
        return cls(**request)


def pending_request(checkpoint: dict | None) -> PendingRequest | None:
    """The permission request a run's checkpoint holds, answered or not; None when there is none."""
    pending = (checkpoint or {}).get(TURN, {}).get("pending")
    return PendingRequest.from_checkpoint(pending) if pending else None


def pending_answered(checkpoint: dict, *, decision: PermissionDecision, by: str) -> dict:
    """The checkpoint with its pending request answered `decision` by `by`
    (nobody when it expired), now."""
    turn = checkpoint[TURN]
    answer = {"decision": decision.value, "decided_by": by, "decided_at": timezone.now().isoformat()}
    return {**checkpoint, TURN: {**turn, "pending": {**turn["pending"], **answer}}}
