"""One projection of a run's events: every event type has its one arm in
run_view_apply and no other module folds events by type; the trace is made
only for a view that keeps one, and keeping it changes nothing else."""

import ast
import dataclasses
from pathlib import Path

import pytest

from agents.models import RunEvent
from agents.projection import RunView, Trace, run_view_apply
from tests.factories import RunFactory

pytestmark = [pytest.mark.django_db, pytest.mark.events_by_hand]

ROOT = Path(__file__).resolve().parents[2]
APPS = ("accounts", "agents", "artifactflow", "artifacts", "conversations", "live")


def _type_arms(node: ast.AST) -> list[str]:
    """The RunEvent.Type members the `case`s under `node` name."""
    return [
        pattern.value.attr
        for match in ast.walk(node)
        if isinstance(match, ast.Match)
        for case in match.cases
        for pattern in ast.walk(case.pattern)
        if isinstance(pattern, ast.MatchValue)
        and isinstance(pattern.value, ast.Attribute)
        and ast.unparse(pattern.value).startswith("RunEvent.Type.")
    ]


def test_every_event_type_has_one_arm_in_the_projection_and_nowhere_else():
    folds = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            arms = _type_arms(ast.parse(path.read_text()))
            if arms:
                folds[str(path.relative_to(ROOT))] = arms

    assert list(folds) == ["agents/projection.py"]
    assert sorted(folds["agents/projection.py"]) == sorted(RunEvent.Type.names)


def _events(run) -> list[RunEvent]:
    rows = [
        (RunEvent.Type.METADATA, "lead_agent", {"model": "m"}),
        (RunEvent.Type.AGENT_START, "lead_agent", {"instruction": "问题"}),
        (RunEvent.Type.TOOL_START, "lead_agent", {"tool": "web_search", "params": {"query": "热泵"}}),
        (
            RunEvent.Type.TOOL_COMPLETE,
            "lead_agent",
            {"tool": "web_search", "success": True, "result": "…", "output": {"kind": "sources", "sources": []}},
        ),
        # Retention keeps the answer in the message alone: a trace reads it there.
        (RunEvent.Type.LLM_COMPLETE, "lead_agent", {"reasoning": "想一想", "token_usage": {"prompt_tokens": 3}}),
        (RunEvent.Type.COMPLETE, "lead_agent", {"duration_ms": 9}),
    ]
    return [
        RunEvent.objects.create(run=run, seq=seq, type=type, agent=agent, data=data)
        for seq, (type, agent, data) in enumerate(rows, start=1)
    ]


def test_a_view_without_a_trace_makes_no_row_and_reads_nothing_more(django_assert_num_queries):
    run = RunFactory(message__response="热泵的答案")
    events = list(RunEvent.objects.filter(pk__in=[event.pk for event in _events(run)]).order_by("seq"))
    plain, traced = RunView(), RunView(trace=Trace(run=run))

    with django_assert_num_queries(0):
        for event in events:
            run_view_apply(plain, event)
    for event in events:
        run_view_apply(traced, event)

    assert [row.type for row in traced.trace.rows] == [event.type for event in events]
    assert traced.trace.rows[-1].summary == "completed in 9 ms: 热泵的答案"
    assert traced.trace.agent_figures["lead_agent"].prompt_tokens == 3
    assert dataclasses.replace(traced, trace=None) == plain
    assert plain.text == "" and plain.status == "completed" and [step.tool for step in plain.steps] == ["web_search"]
