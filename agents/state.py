"""A turn's state, as the engine keeps it between steps and a run's
checkpoint stores it: the agents' frames, the permission request it waits
on, its metrics so far; and how a turn's execution ended and the answers to
a permission request, in the terms the rest of the app reads them.

One type per thing, validated when a checkpoint is read: pydantic models
whose JSON dump is the checkpoint. A module of its own that imports nothing
of the app, so that the selectors and the step fold, which the engine's own
imports reach, can use it. The values are the strings stored in
checkpoints, events and forms.
"""

from enum import StrEnum
from typing import Literal

from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, model_validator

# The engine's part of a run's checkpoint (TurnState); the other part is the
# working copies of the turn's artifacts.
TURN = "turn"
# The format of TurnState in a checkpoint. A checkpoint without one is of
# the first format, which this one still reads.
CHECKPOINT_VERSION = 1


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


class Phase(StrEnum):
    """Where a turn is (seed 004), kept in its checkpoint."""

    LEAD_EXECUTING = "lead_executing"
    SUBAGENT_EXECUTING = "subagent_executing"
    TOOL_EXECUTING = "tool_executing"
    WAITING_PERMISSION = "waiting_permission"
    COMPLETED = "completed"


class PendingRequest(BaseModel):
    """The tool call a turn waits on the user's permission for."""

    # Answering it makes a new one (pending_answered); keys it does not know are
    # ignored, as they were before it was validated.
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    agent: str
    tool: str
    params: dict
    expires_at: str = ""
    call_id: str = ""
    # What the call would send (Tool.request_shown), as the person is shown it; {} for other tools.
    request: dict = Field(default_factory=dict)
    # Set once answered; the engine logs the answer when the turn resumes.
    decision: PermissionDecision | None = None
    decided_by: str = ""
    decided_at: str = ""


class Frame(BaseModel):
    """One agent's memory within the turn."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    instruction: str
    interactions: list[dict] = Field(default_factory=list)
    rounds: int = 0
    # Said to the agent with the result of the call it is waiting for.
    notes: list[str] = Field(default_factory=list)
    # For a subagent: the id of the lead's native call it answers, when it was
    # called, and what it was told and did in its earlier activations this
    # turn (seed 003 "extended" memory), which it sees before its instruction.
    call_id: str = ""
    called_at: str = ""
    history: list[dict] = Field(default_factory=list)
    # What compaction made of the agent's older context (seven sections).
    summary: str = ""
    # The prompt tokens the model service counted for the agent's last call,
    # and what the estimate made of the same request: the next call's size is
    # the one plus the estimate of what changed (compaction.context_tokens).
    reported_tokens: int = 0
    reported_estimate: int = 0


class TurnState(BaseModel):
    """Everything a turn needs to continue, checkpointed after every step."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = CHECKPOINT_VERSION
    frames: list[Frame]
    steps: int = 0
    phase: Phase = Phase.LEAD_EXECUTING
    # The tool call waiting for the user's answer.
    pending: PendingRequest | None = None
    # Tools the user allowed without asking again.
    allowed: list[str] = Field(default_factory=list)
    # Tools a scheduled turn did not call: they wait for an approval no one is there to give.
    skipped: list[str] = Field(default_factory=list)
    # Seed 004's metrics, append-only: a record of every model call
    # (AgentExecutionRecord) and of every tool call (ToolCallRecord).
    agent_executions: list[dict] = Field(default_factory=list)
    tool_calls: list[dict] = Field(default_factory=list)
    # Each subagent's earlier activations this turn, as it will see them again.
    memories: dict[str, list[dict]] = Field(default_factory=dict)
    started_at: str = ""
    # The lead's answer once the turn is complete: a worker that dies while
    # saving it hands it on in the checkpoint instead of asking the model again.
    response: str = ""

    @model_validator(mode="before")
    @classmethod
    def _metrics_totals_converted(cls, data):
        """A checkpoint from before every call had its record: a total per
        agent, and the tool calls' list."""
        if not isinstance(data, dict) or not ({"agent_metrics", "tool_metrics"} & data.keys()):
            return data
        data = dict(data)
        if "agent_metrics" in data:
            data["agent_executions"] = list(data.pop("agent_metrics").values())
        if "tool_metrics" in data:
            data["tool_calls"] = data.pop("tool_metrics")
        return data

    def to_checkpoint(self) -> dict:
        return self.model_dump(mode="json")

    @classmethod
    def from_checkpoint(cls, data: dict) -> "TurnState":
        return cls.model_validate(data)


def checkpoint_new(*, state: TurnState, artifacts: list[dict]) -> dict:
    """A run's checkpoint: the turn's state and the working copies of its
    artifacts (ArtifactManager.working_state)."""
    return {TURN: state.to_checkpoint(), "artifacts": artifacts}


def checkpoint_state(checkpoint: dict) -> TurnState:
    """The turn state a run's checkpoint continues from."""
    return TurnState.from_checkpoint(checkpoint[TURN])


def pending_request(checkpoint: dict | None) -> PendingRequest | None:
    """The permission request a run's checkpoint holds, answered or not; None when there is none."""
    pending = (checkpoint or {}).get(TURN, {}).get("pending")
    return PendingRequest.model_validate(pending) if pending else None


def pending_answered(checkpoint: dict, *, decision: PermissionDecision, by: str) -> dict:
    """The checkpoint with its pending request answered `decision` by `by`
    (nobody when it expired), now."""
    turn = checkpoint[TURN]
    answer = {"decision": decision, "decided_by": by, "decided_at": timezone.now().isoformat()}
    pending = PendingRequest.model_validate(turn["pending"]).model_copy(update=answer)
    return {**checkpoint, TURN: {**turn, "pending": pending.model_dump(mode="json")}}
