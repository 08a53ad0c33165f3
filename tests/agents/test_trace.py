"""The trace's timeline rows of tool results: read from the tools' output,
or from the text of an event written before tools returned one."""

import pytest

from agents.models import RunEvent
from agents.tools.base import tool_error
from agents.tools.web import library_document_fetch
from agents.trace import run_trace
from tests.factories import LibraryDocumentFactory, RunFactory

pytestmark = [pytest.mark.django_db, pytest.mark.events_by_hand]


def _rows(run, results: list[dict]) -> list[tuple[str, bool]]:
    for seq, data in enumerate(results, start=1):
        RunEvent.objects.create(run=run, seq=seq, type=RunEvent.Type.TOOL_COMPLETE, agent="crawl_agent", data=data)
    return [(row.summary, row.failed) for row in run_trace(run=run).rows]


def test_a_tool_result_is_summed_up_from_its_output():
    document = LibraryDocumentFactory(title="Heat pumps", content="Heat pumps move heat.")
    fetched = library_document_fetch(url=document.url)
    failed = tool_error(tool="web_fetch", message="https://example.org timed out after 10 seconds")
    timing = {"truncated": False, "duration_ms": 5}
    results = [
        {"tool": "web_fetch", "success": True, "result": fetched.content, "output": fetched.output, **timing},
        {"tool": "web_fetch", "success": False, "result": failed.content, "output": failed.output, **timing},
        {
            "tool": "web_search",
            "success": True,
            "result": "<search_results>…</search_results>",
            "output": {"kind": "sources", "sources": [{"title": "A", "url": "https://a.org/", "excerpt": "About a"}]},
            **timing,
        },
    ]

    assert _rows(RunFactory(), results) == [
        (f"web_fetch ok, 5 ms: Heat pumps <{document.url}>: Heat pumps move heat.", False),
        ("web_fetch failed, 5 ms: https://example.org timed out after 10 seconds", True),
        ("web_search ok, 5 ms: 1 found: A <https://a.org/>", False),
    ]


def test_an_event_from_before_tools_returned_data_is_summed_up_from_its_text():
    result = '<error tool="web_fetch">https://example.org timed out</error>'
    data = {"tool": "web_fetch", "success": False, "result": result, "truncated": False, "duration_ms": 5}

    assert _rows(RunFactory(), [data]) == [(f"web_fetch failed, 5 ms: {result}", True)]
