import re
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
from typing_extensions import is_typeddict

from agents.event_schema import EVENT_SCHEMAS, EventSchemaError, event_validate
from agents.models import RunEvent

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"

FLUSH = {"flushed": ["research_report.md"], "conflicts": [], "failed": {}}
PARAMS = {"id": "notes", "content": "x" * 2000, "version": 2, "tags": ["a", None], "options": {"deep": True}}

# One payload of each type, every optional field present where the code writes it.
VALID = {
    "metadata": {
        "conversation_id": "5f0c6a52-2f0e-4a8b-9b7e-2c8f1d2e3a4b",
        "message_id": 7,
        "run_id": 3,
        "model": "gpt-4o",
        "demo": False,
    },
    "agent_start": {"instruction": "Find the sources.", "from": "lead_agent"},
    "llm_chunk": {"content": "Heat pumps "},
    "llm_retry": {"reason": "the stream ended before the answer was finished"},
    "llm_complete": {
        "content": "Searching.",
        "reasoning": "",
        "tool_calls": [{"id": "call_1", "name": "web_search", "arguments": '{"query": "heat pumps"}'}],
        "token_usage": {"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128},
        "duration_ms": 840,
    },
    "compaction_start": {"tokens_before": 90_000},
    "compaction": {"summary": "## Goal\n…", "tokens_before": 90_000, "tokens_after": 12_000, "message_id": 7},
    "agent_complete": {"response": "The report is written."},
    "tool_start": {"tool": "create_artifact", "params": PARAMS, "params_truncated": {"content": 5000}},
    "tool_complete": {
        "tool": "update_artifact",
        "success": True,
        "result": '<artifact version="2">…</artifact>',
        "truncated": False,
        "duration_ms": 4,
        "artifact_change": {
            "artifact_id": "research_report.md",
            "title": "Report",
            "version": 2,
            "length": 1200,
            "removed": 10,
            "added": 30,
        },
        "stored_as": "web_fetch_result_1",
        "output": {"kind": "artifact", "artifact_id": "research_report.md", "title": "Report", "version": 2},
        "notes": ["Only the first of your 2 tool calls was run: call one tool at a time."],
    },
    "permission_request": {
        "id": "4b1d0c5e9a8f4e2d8c7b6a5f4e3d2c1b",
        "tool": "web_fetch",
        "params": {"url": "https://example.com/"},
        "expires_at": "2025-01-01T12:05:00+00:00",
    },
    "permission_result": {
        "id": "4b1d0c5e9a8f4e2d8c7b6a5f4e3d2c1b",
        "tool": "web_fetch",
        "decision": "approve",
        "by": "alice",
        "decided_at": "2025-01-01T12:01:00+00:00",
    },
    "complete": {"response": "Heat pumps move heat.", "duration_ms": 5400, "artifacts": FLUSH},
    "error": {"message": "Cancelled.", "cancelled": True, "artifacts": {**FLUSH, "failed": {"notes": "too long"}}},
}

ALSO_FAILED = {"tool": "call_subagent", "success": False, "result": "", "truncated": False, "duration_ms": 0}
# Other shapes the code writes.
ALSO_VALID = [
    ("metadata", {"run_id": 3, "model": "gpt-4o", "resumed": True}),
    ("agent_start", {"instruction": "What is WAL mode?"}),
    ("llm_complete", {**VALID["llm_complete"], "tool_calls": [], "token_usage": None}),
    (
        "llm_complete",
        {
            **VALID["llm_complete"],
            "token_usage": {
                "prompt_tokens": 1,
                "completion_tokens": 2,
                "total_tokens": 3,
                "prompt_tokens_details": None,
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        },
    ),
    ("tool_start", {"tool": "web_search", "params": {"query": "heat pumps"}}),
    ("tool_complete", ALSO_FAILED),
    (
        "tool_complete",
        {
            **{k: VALID["tool_complete"][k] for k in ("tool", "success", "result", "truncated", "duration_ms")},
            "url": "https://example.com/",
            "status": 200,
            "bytes": 5120,
        },
    ),
    (
        "tool_complete",
        {
            **{k: VALID["tool_complete"][k] for k in ("tool", "success", "result", "truncated", "duration_ms")},
            "url": "library://3",
            "title": "Solid-state batteries",
        },
    ),
    (
        "tool_complete",
        {
            **{k: VALID["tool_complete"][k] for k in ("tool", "success", "result", "truncated", "duration_ms")},
            "provider": "local",
            "results": 0,
            "output": {"kind": "sources", "sources": [], "message": "Nothing in the team library matches this query."},
        },
    ),
    (
        "tool_complete",
        {
            **{k: VALID["tool_complete"][k] for k in ("tool", "success", "result", "truncated", "duration_ms")},
            "output": {
                "kind": "sources",
                "sources": [{"title": "Heat pumps", "url": "library://3", "excerpt": "Heat pumps move heat."}],
            },
        },
    ),
    (
        "tool_complete",
        {
            **{k: VALID["tool_complete"][k] for k in ("tool", "success", "result", "truncated", "duration_ms")},
            "output": {"kind": "page", "source": {"title": "", "url": "https://example.com/", "excerpt": "Hello"}},
        },
    ),
    *(
        ("tool_complete", {**ALSO_FAILED, "output": output})
        for output in (
            {"kind": "error", "message": "There is no artifact draft."},
            {"kind": "no_report", "agent": "search_agent", "message": "(no answer)"},
        )
    ),
    ("tool_complete", {**ALSO_FAILED, "success": True, "output": {"kind": "report", "agent": "search_agent"}}),
    ("permission_request", {**VALID["permission_request"], "params_truncated": {"url": 2400}}),
    ("permission_result", {**VALID["permission_result"], "decision": "expired", "by": ""}),
    ("error", {"message": "The model returned an empty answer.", "artifacts": FLUSH}),
]


def test_every_event_type_has_a_schema_and_an_example():
    assert set(EVENT_SCHEMAS) == set(RunEvent.Type.values) == set(VALID)


@pytest.mark.parametrize(("type", "data"), [*VALID.items(), *ALSO_VALID])
def test_a_payload_of_the_declared_shape_passes(type, data):
    event_validate(type=type, data=data)


@pytest.mark.parametrize(
    ("type", "field"),
    [
        (type, field)
        for type, data in VALID.items()
        for field in data
        if field
        not in ("from", "params_truncated", "artifact_change", "stored_as", "output", "notes", "cancelled", "demo")
        # The answer a folded run stores once, in its message.
        and (type, field) not in (("llm_complete", "content"), ("agent_complete", "response"), ("complete", "response"))
    ],
)
def test_a_missing_field_is_named(type, field):
    data = {key: value for key, value in VALID[type].items() if key != field}
    with pytest.raises(EventSchemaError, match=rf"^Invalid {type} event: .*\b{field}: Field required"):
        event_validate(type=type, data=data)


@pytest.mark.parametrize(
    ("type", "change", "problem"),
    [
        ("tool_complete", {"duration_ms": "4"}, r"duration_ms: Input should be a valid integer \(got '4'\)"),
        ("tool_complete", {"success": 1}, r"success: Input should be a valid boolean \(got 1\)"),
        ("tool_complete", {"duration_ms": 4.0}, "duration_ms: Input should be a valid integer"),
        ("llm_chunk", {"content": None}, "content: Input should be a valid string"),
        ("permission_result", {"decision": "maybe"}, "decision: Input should be 'approve', 'always', 'deny'"),
        ("error", {"cancelled": False}, r"cancelled: Input should be True \(got False\)"),
        ("complete", {"artifacts": {**FLUSH, "failed": []}}, "artifacts.failed: Input should be a valid dictionary"),
        ("llm_complete", {"token_usage": {"prompt_tokens": 1}}, "token_usage.completion_tokens: Field required"),
        ("llm_complete", {"tool_calls": [{"id": "c", "name": "x"}]}, "tool_calls.0.arguments: Field required"),
        ("tool_start", {"params_truncated": {"content": "5000"}}, "params_truncated.content: Input should be a valid"),
        ("tool_start", {"params": {"at": object()}}, "params.at: input was not a valid JSON value"),
        ("metadata", {"demo": "yes"}, "started.demo: Input should be a valid boolean"),
        ("agent_start", {"from": ["lead_agent"]}, "from: Input should be a valid string"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(type, change, problem):
    with pytest.raises(EventSchemaError, match=rf"^Invalid {type} event: .*{problem}"):
        event_validate(type=type, data={**VALID[type], **change})


def test_a_nested_field_of_the_wrong_type_is_named_by_its_path():
    change = {**VALID["tool_complete"]["artifact_change"], "version": "2"}
    with pytest.raises(EventSchemaError, match=r"artifact_change\.version: Input should be a valid integer"):
        event_validate(type="tool_complete", data={**VALID["tool_complete"], "artifact_change": change})


@pytest.mark.parametrize(
    ("type", "data", "extra"),
    [
        ("complete", {**VALID["complete"], "cancelled": True}, "cancelled"),
        ("metadata", {"run_id": 3, "model": "gpt-4o", "resumed": True, "demo": True}, "resumed.demo"),
        ("tool_complete", {**VALID["tool_complete"], "artifact": "notes"}, "artifact"),
    ],
)
def test_an_undeclared_field_is_named(type, data, extra):
    with pytest.raises(EventSchemaError, match=rf"^Invalid {type} event: {re.escape(extra)}: Extra inputs"):
        event_validate(type=type, data=data)


def test_a_tool_output_is_checked_against_the_shape_its_kind_names():
    data = {**VALID["tool_complete"], "output": {"kind": "page", "sources": []}}
    with pytest.raises(EventSchemaError, match=r"output\.page\.source: Field required; output\.page\.sources: Extra"):
        event_validate(type="tool_complete", data=data)
    with pytest.raises(EventSchemaError, match=r"output: Input tag 'summary' found using 'kind' does not match"):
        event_validate(type="tool_complete", data={**data, "output": {"kind": "summary"}})


def test_a_payload_that_is_not_an_object_fails():
    with pytest.raises(EventSchemaError, match=r"^Invalid llm_chunk event: \(the payload\): Input should be a valid"):
        event_validate(type="llm_chunk", data=["text"])


@pytest.mark.parametrize("type", ["tool_progress", "", "Complete"])
def test_an_unknown_type_fails(type):
    with pytest.raises(EventSchemaError, match=rf"^Unknown event type '{type}'; known: metadata, agent_start"):
        event_validate(type=type, data={})


# --- docs/events.md names every declared field, and only those ---------------------------------


def _typeddicts(annotation) -> list:
    """The TypedDicts an annotation is, or holds (in a list, a union, as Annotated)."""
    if is_typeddict(annotation):
        return [annotation]
    return [td for arg in get_args(annotation) for td in _typeddicts(arg)]


def _declared(schema) -> dict[str, tuple[bool, set[str]]]:
    """Field → (optional, its own fields) over every shape an event type has."""
    shapes = _typeddicts(schema)
    required = set.intersection(*(set(shape.__required_keys__) for shape in shapes))
    hints = {name: hint for shape in shapes for name, hint in get_type_hints(shape).items()}
    return {
        name: (name not in required, {sub for nested in _typeddicts(hint) for sub in nested.__annotations__})
        for name, hint in hints.items()
    }


def _documented() -> dict[str, dict[str, tuple[bool, set[str]]]]:
    parts = re.split(r"^## `(\w+)`\n", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    documented = {}
    for type, section in zip(parts[1::2], parts[2::2], strict=True):
        fields = documented[type] = {}
        for line in section.splitlines():
            if field := re.match(r"- `(\w+)`( \*optional\*)?", line):
                current = field[1]
                assert current not in fields, f"{type}.{current} is documented twice"
                fields[current] = (bool(field[2]), set())
            elif nested := re.match(r"  - `(\w+)`", line):
                fields[current][1].add(nested[1])
    return documented


def test_the_doc_has_a_section_for_each_event_type():
    assert list(_documented()) == list(EVENT_SCHEMAS)


@pytest.mark.parametrize("type", list(EVENT_SCHEMAS))
def test_the_doc_names_each_field_of_the_schema_and_whether_it_is_optional(type):
    assert _documented()[type] == _declared(EVENT_SCHEMAS[type])
