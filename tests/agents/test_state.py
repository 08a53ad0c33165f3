"""The turn state's checkpoint: one validated, versioned type, which reads
the checkpoints workers wrote before it."""

import pytest
from pydantic import ValidationError

from agents.state import (
    CHECKPOINT_VERSION,
    TURN,
    PermissionDecision,
    Phase,
    checkpoint_new,
    checkpoint_state,
    pending_answered,
    pending_request,
)

# A checkpoint exactly as a worker wrote it before the state was versioned
# (dataclasses.asdict of the engine's TurnState): a lead that handed over to
# the search agent, which waits for permission to fetch a page.
UNVERSIONED = {
    TURN: {
        "frames": [
            {
                "agent": "lead_agent",
                "instruction": "Research WAL",
                "interactions": [
                    {"role": "assistant", "content": "<tool_call>…</tool_call>"},
                ],
                "rounds": 1,
                "notes": [],
                "call_id": "",
                "called_at": "",
                "history": [],
                "summary": "",
                "reported_tokens": 120,
                "reported_estimate": 110,
            },
            {
                "agent": "search_agent",
                "instruction": "Find sources on WAL",
                "interactions": [],
                "rounds": 1,
                "notes": ["You have 4 tool calls left; then write your final answer."],
                "call_id": "call_1",
                "called_at": "2026-11-20T10:00:01+00:00",
                "history": [{"role": "user", "content": "earlier"}],
                "summary": "",
                "reported_tokens": 0,
                "reported_estimate": 0,
            },
        ],
        "steps": 3,
        "phase": "waiting_permission",
        "pending": {
            "id": "4f1c",
            "agent": "search_agent",
            "tool": "web_fetch",
            "params": {"url": "https://example.org/wal"},
            "call_id": "call_2",
            "expires_at": "2026-11-20T10:10:00+00:00",
        },
        "allowed": ["create_artifact"],
        "agent_executions": [
            {
                "agent_name": "lead_agent",
                "model": "scripted-model",
                "purpose": "step",
                "success": True,
                "token_usage": None,
                "llm_duration_ms": 12,
                "started_at": "2026-11-20T10:00:00+00:00",
                "completed_at": "2026-11-20T10:00:01+00:00",
            }
        ],
        "tool_calls": [],
        "memories": {"crawl_agent": [{"role": "assistant", "content": "read it"}]},
        "started_at": "2026-11-20T10:00:00+00:00",
        "response": "",
    },
    "artifacts": [],
}


def test_a_checkpoint_from_before_the_version_loads_as_the_first_version():
    state = checkpoint_state(UNVERSIONED)

    assert state.version == CHECKPOINT_VERSION == 1
    assert [frame.agent for frame in state.frames] == ["lead_agent", "search_agent"]
    assert state.frames[0].interactions == UNVERSIONED[TURN]["frames"][0]["interactions"]
    assert state.frames[1].notes == ["You have 4 tool calls left; then write your final answer."]
    assert state.phase == Phase.WAITING_PERMISSION and state.steps == 3
    assert state.pending.tool == "web_fetch" and state.pending.decision is None
    assert state.memories["crawl_agent"][0]["content"] == "read it"
    assert state.agent_executions == UNVERSIONED[TURN]["agent_executions"]


def test_a_checkpoint_written_again_keeps_its_content_and_names_its_version():
    written = checkpoint_new(state=checkpoint_state(UNVERSIONED), artifacts=[])[TURN]

    # Unanswered, and no request shown (a field added later, with its default).
    defaults = {"decision": None, "decided_by": "", "decided_at": "", "request": {}}
    assert written == {
        **UNVERSIONED[TURN],
        "version": 1,
        "pending": {**UNVERSIONED[TURN]["pending"], **defaults},
        # Added later with its default: no tool skipped by a scheduled turn.
        "skipped": [],
    }
    assert checkpoint_state({TURN: written}) == checkpoint_state(UNVERSIONED)


def test_a_pending_request_of_the_first_version_is_answered():
    answered = pending_answered(UNVERSIONED, decision=PermissionDecision.ALWAYS, by="ada")

    pending = pending_request(answered)
    assert pending.decision == PermissionDecision.ALWAYS and pending.decided_by == "ada" and pending.decided_at
    assert checkpoint_state(answered).pending == pending
    assert pending_request(UNVERSIONED).decision is None


def test_a_checkpoint_of_an_unknown_version_or_shape_is_refused():
    with pytest.raises(ValidationError, match="version"):
        checkpoint_state({TURN: {**UNVERSIONED[TURN], "version": 2}})
    with pytest.raises(ValidationError, match="surprise"):
        checkpoint_state({TURN: {**UNVERSIONED[TURN], "surprise": 1}})
