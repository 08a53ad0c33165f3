from datetime import UTC, datetime, timedelta
from xml.sax.saxutils import escape, quoteattr

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents import selectors
from agents.models import Run, RunEvent
from agents.projection import RunView, run_view_apply
from agents.selectors import lead_model_options, model_use, run_activity
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.state import pending_request
from agents.tools.base import ToolContext, ToolResult, tool_error
from agents.tools.search import web_search
from agents.tools.web import library_document_fetch
from artifacts.models import Artifact
from artifacts.services import artifact_version_save
from conversations.lifecycle import conversation_start
from library.selectors import library_url_id
from tests.factories import ConversationFactory, LibraryDocumentFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def library_search(settings):
    # web_search's results here come from the team library, as on a machine with no search service.
    settings.SEARCH_PROVIDER = "local"


START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LEAD, SEARCH, CRAWL = "lead_agent", "search_agent", "crawl_agent"


def _log(run, events, *, start=1):
    """Writes the events as a worker would, each `at` seconds into the run."""
    for seq, (at, type, agent, data) in enumerate(events, start=start):
        event = RunEvent.objects.create(run=run, seq=seq, type=type, agent=agent, data=data)
        RunEvent.objects.filter(pk=event.pk).update(created_at=START + timedelta(seconds=at))


def _live(run) -> RunView:
    """The view a page folds event by event while the run streams."""
    view = RunView()
    for event in run.events.order_by("seq"):
        run_view_apply(view, event)
    return view


def _tree(steps):
    return [
        (
            step.kind,
            step.agent,
            step.tool,
            step.subject,
            step.status,
            step.outcome,
            step.duration_text,
            _tree(step.children),
        )
        for step in steps
    ]


def _search_result(query="heat pump efficiency"):
    """What web_search tells the model, from the team library."""
    return web_search(ToolContext(artifacts=None), query=query).content


def _research_turn(run, *, decision="approve", tool_start_first=False):
    """A turn in which the lead hands a search and a fetch to its subagents, and
    the fetch waits 60 s for the user's answer. The fetch starts once approved
    (seed 004); `tool_start_first` logs it as runs did before, started before it asked."""
    heat = LibraryDocumentFactory(title="Heat pumps", content="A heat pump moves heat; its efficiency is its COP.")
    fetched = library_document_fetch(url=heat.url)
    asked = ("permission_request", CRAWL, {"id": "p1", "tool": "web_fetch", "params": {"url": heat.url}})
    answered = ("permission_result", CRAWL, {"id": "p1", "tool": "web_fetch", "decision": decision})
    started = ("tool_start", CRAWL, {"tool": "web_fetch", "params": {"url": heat.url}})
    if tool_start_first:
        fetch = [(6, *started), (6.5, *asked), (66.5, *answered)]
    else:
        # A denied call never starts.
        fetch = [(6, *asked), (66, *answered), *([(66.5, *started)] if decision == "approve" else [])]
    _log(
        run,
        [
            (0, "metadata", "", {"model": "m"}),
            (0, "agent_start", LEAD, {"instruction": "How efficient are heat pumps?"}),
            (
                1,
                "tool_start",
                LEAD,
                {
                    "tool": "create_artifact",
                    "params": {"id": "task_plan", "title": "Task plan", "content": "- [ ] look"},
                },
            ),
            (
                1.5,
                "tool_complete",
                LEAD,
                {
                    "tool": "create_artifact",
                    "success": True,
                    "duration_ms": 3,
                    "result": '<artifact version="1"><id>task_plan</id>Created.</artifact>',
                    "artifact_change": {"artifact_id": "task_plan", "title": "Task plan", "version": 1},
                },
            ),
            (
                2,
                "tool_start",
                LEAD,
                {"tool": "call_subagent", "params": {"agent": SEARCH, "instruction": "Find heat pump sources"}},
            ),
            (2, "agent_start", SEARCH, {"instruction": "Find heat pump sources", "from": LEAD}),
            (3, "tool_start", SEARCH, {"tool": "web_search", "params": {"query": "heat pump efficiency"}}),
            (3.25, "tool_complete", SEARCH, {"tool": "web_search", "success": True, "result": _search_result()}),
            (4, "agent_complete", SEARCH, {"response": "Found **Heat pumps** at library://1."}),
            (4, "tool_complete", LEAD, {"tool": "call_subagent", "success": True, "result": "<subagent_result>cut…"}),
            (
                5,
                "tool_start",
                LEAD,
                {"tool": "call_subagent", "params": {"agent": CRAWL, "instruction": f"Read {heat.url}"}},
            ),
            (5, "agent_start", CRAWL, {"instruction": f"Read {heat.url}", "from": LEAD}),
            *fetch,
            (
                67,
                "tool_complete",
                CRAWL,
                {
                    "tool": "web_fetch",
                    "success": decision == "approve",
                    "duration_ms": 400,
                    "result": fetched.content
                    if decision == "approve"
                    else tool_error(tool="web_fetch", message="The user denied this call.").content,
                },
            ),
            (68, "agent_complete", CRAWL, {"response": "A heat pump's COP is its efficiency."}),
            (68, "tool_complete", LEAD, {"tool": "call_subagent", "success": True, "result": "<subagent_result>…"}),
            (70, "llm_chunk", LEAD, {"content": "Heat pumps are efficient."}),
            (71, "complete", "", {"response": "Heat pumps are efficient.", "duration_ms": 71000}),
        ],
    )
    return heat


# A log written before tool_start followed the approval folds the same.
@pytest.mark.parametrize("tool_start_first", [False, True])
@pytest.mark.events_by_hand
def test_each_agents_steps_sit_under_its_hand_over_with_their_results_and_times(user, tool_start_first):
    run = RunFactory(message__conversation__owner=user)
    heat = _research_turn(run, tool_start_first=tool_start_first)

    fold = run_activity(run=run)

    assert _tree(fold.steps) == [
        ("tool", LEAD, "create_artifact", "“Task plan”", "ok", "", "500 ms", []),
        (
            "agent",
            SEARCH,
            "",
            "“Find heat pump sources”",
            "ok",
            "reported back",
            "2.0 s",
            [
                ("tool", SEARCH, "web_search", "“heat pump efficiency”", "ok", "1 result", "250 ms", []),
            ],
        ),
        # The fetch names the document by the title its search found; the
        # minute spent waiting for the user counts in no duration.
        (
            "agent",
            CRAWL,
            "",
            f"“Read {heat.url}”",
            "ok",
            "reported back",
            "3.0 s",
            [
                ("tool", CRAWL, "web_fetch", f"“Heat pumps” {heat.url}", "ok", "", "1.0 s", []),
            ],
        ),
    ]
    assert fold.work == timedelta(seconds=11) and fold.wait == timedelta(seconds=60)
    assert fold.tool_calls == 5
    crawl = fold.steps[2]
    assert crawl.by == LEAD and crawl.children[0].permission == "approve"
    assert crawl.body == "A heat pump's COP is its efficiency."
    # The live list is the same fold, event by event, streamed text and all.
    assert _tree(_live(run).steps) == _tree(fold.steps)


@pytest.mark.events_by_hand
def test_a_denied_call_is_not_run_and_its_wait_is_not_counted(user):
    run = RunFactory(message__conversation__owner=user)
    _research_turn(run, decision="deny")

    fetch = run_activity(run=run).steps[2].children[0]

    assert (fetch.status, fetch.status_text, fetch.permission_text, fetch.duration_text) == (
        "denied",
        "not run",
        "you denied it",
        "1.0 s",
    )
    assert fetch.text == "The user denied this call."


@pytest.mark.events_by_hand
def test_the_status_line_names_the_agent_and_what_it_does(user):
    run = RunFactory(message__conversation__owner=user)
    heat = _research_turn(run)
    view = RunView()
    lines = []
    for event in run.events.order_by("seq"):
        run_view_apply(view, event)
        lines.append((event.type, view.activity))
        if event.type == "permission_request":
            asked = view.pending

    assert lines == [
        ("metadata", "Starting"),
        ("agent_start", "lead_agent · thinking"),
        ("tool_start", "lead_agent · writing “Task plan”"),
        ("tool_complete", "lead_agent · thinking"),
        ("tool_start", "lead_agent · handing over to search_agent"),
        ("agent_start", "search_agent · working on “Find heat pump sources”"),
        ("tool_start", "search_agent · searching the team library for “heat pump efficiency”"),
        ("tool_complete", "search_agent · thinking"),
        ("agent_complete", "lead_agent · reading search_agent’s report"),
        ("tool_complete", "lead_agent · thinking"),
        ("tool_start", "lead_agent · handing over to crawl_agent"),
        ("agent_start", f"crawl_agent · working on “Read {heat.url}”"),
        ("permission_request", "Waiting for your approval"),
        ("permission_result", f"crawl_agent · reading “Heat pumps” ({heat.url})"),
        ("tool_start", f"crawl_agent · reading “Heat pumps” ({heat.url})"),
        ("tool_complete", "crawl_agent · thinking"),
        ("agent_complete", "lead_agent · reading crawl_agent’s report"),
        ("tool_complete", "lead_agent · thinking"),
        ("llm_chunk", "lead_agent · writing the answer"),
        ("complete", ""),
    ]
    # The question names what the call reads, and the task it serves.
    assert (asked.agent, asked.subject, asked.why) == (CRAWL, f"“Heat pumps” {heat.url}", f"Read {heat.url}")
    # A library document is no host on the web.
    assert (asked.params, asked.target, asked.can_approve) == ((("url", heat.url),), None, True)


def _completed(tool, result, **more):
    """The tool_complete data the engine writes for a tool's result, without
    the text the model was told: the page reads the output."""
    notes = {"notes": result.notes} if result.notes else {}
    data = {"tool": tool, "success": result.success, "result": "", "truncated": False, "duration_ms": 1}
    return {**data, "output": result.output, **notes, **result.metadata, **more}


@pytest.mark.events_by_hand
def test_search_results_fetched_pages_artifacts_and_errors_are_read_from_the_tools_output(user):
    documents = [
        LibraryDocumentFactory(title="Heat pumps", content="Heat pump efficiency is measured as COP."),
        LibraryDocumentFactory(
            title="COP explained", content="# COP\n\n**Coefficient** of performance of a heat pump " + "word " * 500
        ),
    ]
    read = ToolResult(
        success=True,
        content="",
        output={"kind": "artifact", "artifact_id": "notes", "title": "My notes", "version": 4},
        notes=["You have 2 tool calls left; then write your final answer."],
    )
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "tool_start", SEARCH, {"tool": "web_search", "params": {"query": "heat pump"}}),
            (
                1,
                "tool_complete",
                SEARCH,
                _completed("web_search", web_search(ToolContext(artifacts=None), query="heat pump")),
            ),
            (2, "tool_start", CRAWL, {"tool": "web_fetch", "params": {"url": documents[1].url}}),
            (
                3,
                "tool_complete",
                CRAWL,
                _completed("web_fetch", library_document_fetch(url=documents[1].url), stored_as="web_fetch_result_1"),
            ),
            (4, "tool_start", LEAD, {"tool": "read_artifact", "params": {"id": "notes"}}),
            (5, "tool_complete", LEAD, _completed("read_artifact", read)),
            (6, "tool_start", LEAD, {"tool": "update_artifact", "params": {"id": "ghost"}}),
            (
                7,
                "tool_complete",
                LEAD,
                _completed("update_artifact", tool_error(tool="update_artifact", message="No artifact ghost.")),
            ),
            (8, "tool_start", SEARCH, {"tool": "web_search", "params": {"query": "zeppelins"}}),
            (
                9,
                "tool_complete",
                SEARCH,
                _completed("web_search", web_search(ToolContext(artifacts=None), query="zeppelins")),
            ),
        ],
    )

    search, fetch, read, update, nothing = run_activity(run=run).steps

    assert sorted((s.title, s.url) for s in search.sources) == sorted((d.title, f"{d.url}#1") for d in documents)
    assert all("**" not in s.excerpt and s.excerpt for s in search.sources) and search.outcome == "2 results"
    # A library source opens the document's page, a hit's at the passage the search found.
    for source in search.sources:
        page = reverse("library-document", args=[library_url_id(source.url)])
        assert source.href.startswith(f"{page}?passage=") and source.href.endswith("#passage")
    page = reverse("library-document", args=[documents[1].pk])
    assert (fetch.page.title, fetch.page.url, fetch.page.href) == ("COP explained", documents[1].url, page)
    assert fetch.page.excerpt.startswith("COP Coefficient of performance of a heat pump word")
    assert len(fetch.page.excerpt) <= 300
    assert fetch.subject == f"“COP explained” {documents[1].url}"
    assert fetch.stored.artifact_id == "web_fetch_result_1" and not fetch.text
    assert (read.artifact.artifact_id, read.artifact.title, read.artifact.version, read.outcome) == (
        "notes",
        "My notes",
        4,
        "",
    )
    assert read.notes == ["You have 2 tool calls left; then write your final answer."]
    assert (update.status, update.text, update.outcome) == ("failed", "No artifact ghost.", "No artifact ghost.")
    assert (nothing.sources, nothing.outcome) == ([], "no results")
    assert nothing.text.startswith("Nothing in the team library matches this query.")


@pytest.mark.events_by_hand
def test_an_event_from_before_tools_returned_data_is_read_from_the_tools_xml(user):
    documents = [
        LibraryDocumentFactory(title="Heat pumps", content="Heat pump efficiency is measured as COP."),
        LibraryDocumentFactory(title="Heat pump sizing", content="A heat pump sized too small runs all day."),
    ]
    long_page = (
        '<page url="https://example.org/cop" title="COP explained"><content>'
        + escape("# COP\n\n**Coefficient** of performance " + "word " * 500)
        + "</content></page>"
    )
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "tool_start", SEARCH, {"tool": "web_search", "params": {"query": "heat pump"}}),
            (
                1,
                "tool_complete",
                SEARCH,
                {"tool": "web_search", "success": True, "result": _search_result("heat pump")},
            ),
            (2, "tool_start", CRAWL, {"tool": "web_fetch", "params": {"url": "https://example.org/cop"}}),
            # Too long for the context: kept as an artifact, the model shown a preview.
            (
                3,
                "tool_complete",
                CRAWL,
                {
                    "tool": "web_fetch",
                    "success": True,
                    "url": "https://example.org/cop",
                    "stored_as": "web_fetch_result_1",
                    "result": f'<stored_result artifact="web_fetch_result_1" chars="3000"><preview>{escape(long_page[:1500])}…</preview><note>Stored.</note></stored_result>',
                },
            ),
            (4, "tool_start", LEAD, {"tool": "read_artifact", "params": {"id": "notes"}}),
            (
                5,
                "tool_complete",
                LEAD,
                {
                    "tool": "read_artifact",
                    "success": True,
                    "result": '<artifact id="notes" version="4" content_type="text/markdown" title="My notes"><content>…</content></artifact>',
                },
            ),
            (
                6,
                "tool_start",
                LEAD,
                {"tool": "update_artifact", "params": {"id": "ghost", "old_str": "a", "new_str": "b"}},
            ),
            (
                7,
                "tool_complete",
                LEAD,
                {
                    "tool": "update_artifact",
                    "success": False,
                    "result": '<error tool="update_artifact"><id>ghost</id><message>No artifact ghost &amp; no draft.</message></error>',
                },
            ),
        ],
    )

    search, fetch, read, update = run_activity(run=run).steps

    assert sorted((s.title, s.url) for s in search.sources) == sorted((d.title, f"{d.url}#1") for d in documents)
    # The library marks its matches with ** for the model; the page shows plain words.
    assert all("**" not in s.excerpt and s.excerpt for s in search.sources)
    # Without a snippet to mark, a passage's source opens the document at the passage.
    page = reverse("library-document", args=[library_url_id(search.sources[0].url)])
    assert search.sources[0].href == f"{page}?at=1#passage"
    assert (fetch.page.title, fetch.page.url, fetch.page.href) == (
        "COP explained",
        "https://example.org/cop",
        "https://example.org/cop",
    )
    assert fetch.page.excerpt.startswith("COP Coefficient of performance word") and len(fetch.page.excerpt) <= 300
    assert fetch.subject == "“COP explained” https://example.org/cop"
    assert fetch.stored.artifact_id == "web_fetch_result_1" and not fetch.text
    assert (read.artifact.artifact_id, read.artifact.title, read.artifact.version, read.outcome) == (
        "notes",
        "My notes",
        4,
        "",
    )
    assert (update.status, update.text, update.outcome) == (
        "failed",
        "No artifact ghost & no draft.",
        "No artifact ghost & no draft.",
    )


@pytest.mark.parametrize(
    "result, text",
    [
        ("<search_results><result><title>Unclosed", "<search_results><result><title>Unclosed"),
        ("<<not xml>> & all", "<<not xml>> & all"),
        ("<page url='x", "<page url='x"),
        (None, ""),
        ({"result": "a dict"}, ""),
    ],
)
@pytest.mark.events_by_hand
def test_a_result_of_no_shape_we_read_is_kept_as_plain_text(user, result, text):
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "tool_start", SEARCH, {"tool": "web_search", "params": {"query": "q"}}),
            (1, "tool_complete", SEARCH, {"tool": "web_search", "success": True, "result": result}),
        ],
    )

    (step,) = run_activity(run=run).steps

    assert (step.text, step.sources, step.page, step.status) == (text, [], None, "ok")


@pytest.mark.events_by_hand
def test_a_result_cut_short_keeps_what_came_before_the_cut(user):
    hits = "".join(
        f"<result><title>Source {n}</title><url>https://example.org/{n}</url><snippet>About {n}.</snippet></result>"
        for n in range(3)
    )
    whole = f'<search_results provider="searxng" query="q">{hits}</search_results>'
    # The event keeps the result's first 2,000 characters: here, up to the middle of a snippet.
    cut = whole[: whole.index("About 2") + 3]
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "tool_start", SEARCH, {"tool": "web_search", "params": {"query": "q"}}),
            (1, "tool_complete", SEARCH, {"tool": "web_search", "success": True, "result": cut, "truncated": True}),
        ],
    )

    (step,) = run_activity(run=run).steps

    assert [(s.title, s.url) for s in step.sources] == [(f"Source {n}", f"https://example.org/{n}") for n in range(3)]
    assert [s.excerpt for s in step.sources] == ["About 0.", "About 1.", "Abo"]


@pytest.mark.events_by_hand
def test_titles_and_urls_stay_text_whatever_a_page_put_in_them(user):
    title = '<img src=x onerror="alert(1)">'
    result = (
        '<search_results provider="searxng" query="q">'
        f"<result><title>{escape(title)}</title><url>javascript:alert(1)</url><snippet>{escape('<b>hi</b>')}</snippet></result>"
        "</search_results>"
    )
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "tool_start", SEARCH, {"tool": "web_search", "params": {"query": "q"}}),
            (1, "tool_complete", SEARCH, {"tool": "web_search", "success": True, "result": result}),
            (2, "tool_start", CRAWL, {"tool": "web_fetch", "params": {"url": "javascript:alert(1)"}}),
            (
                3,
                "tool_complete",
                CRAWL,
                {
                    "tool": "web_fetch",
                    "success": True,
                    "result": f"<page url={quoteattr('javascript:alert(1)')} title={quoteattr(title)}><content>x</content></page>",
                },
            ),
        ],
    )

    search, fetch = run_activity(run=run).steps

    # Unescaped once, to be escaped by the template; never a link.
    assert (search.sources[0].title, search.sources[0].excerpt, search.sources[0].href) == (title, "<b>hi</b>", "")
    assert (fetch.page.title, fetch.page.href) == (title, "")


@pytest.mark.events_by_hand
def test_a_worker_that_died_mid_call_leaves_the_call_interrupted_and_the_redo_its_own_step(user):
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "tool_start", LEAD, {"tool": "create_artifact", "params": {"id": "report", "content": "…"}}),
            (30, "metadata", "", {"model": "m", "resumed": True}),
            (31, "tool_start", LEAD, {"tool": "create_artifact", "params": {"id": "report", "content": "…"}}),
            (
                32,
                "tool_complete",
                LEAD,
                {
                    "tool": "create_artifact",
                    "success": True,
                    "result": '<artifact version="1"><id>report</id>Created.</artifact>',
                },
            ),
            (33, "error", "", {"message": "The model service answered 500."}),
        ],
    )

    steps = run_activity(run=run).steps

    assert [(s.kind, s.tool, s.status, s.outcome) for s in steps] == [
        ("tool", "create_artifact", "stopped", "interrupted, done again"),
        ("resumed", "", "ok", ""),
        ("tool", "create_artifact", "ok", ""),
    ]


@pytest.mark.events_by_hand
def test_a_run_that_ends_while_a_call_waits_for_an_answer_stops_it(user):
    run = RunFactory(message__conversation__owner=user, status=Run.Status.CANCELLED)
    _log(
        run,
        [
            (
                1,
                "permission_request",
                CRAWL,
                {"id": "p", "tool": "web_fetch", "params": {"url": "https://example.org"}},
            ),
            (600, "error", "", {"message": "Cancelled.", "cancelled": True}),
        ],
    )

    fold = run_activity(run=run)

    (fetch,) = fold.steps
    assert (fetch.kind, fetch.tool, fetch.subject) == ("tool", "web_fetch", "https://example.org")
    assert (fetch.status, fetch.permission_text, fetch.duration_text) == (
        "stopped",
        "the run ended before an answer",
        "0 ms",
    )
    assert fold.wait == timedelta(seconds=599) and fold.tool_calls == 1


@pytest.mark.events_by_hand
def test_the_leads_prose_before_a_call_that_asks_for_approval_is_not_its_answer(user):
    run = RunFactory(message__conversation__owner=user, status=Run.Status.WAITING_PERMISSION)
    _log(
        run,
        [
            (0, "agent_start", LEAD, {"instruction": "Draft it"}),
            (1, "llm_chunk", LEAD, {"content": "Let me write the draft."}),
            (2, "llm_complete", LEAD, {"content": "Let me write the draft.<tool_call>…</tool_call>"}),
            (
                2,
                "permission_request",
                LEAD,
                {"id": "p", "tool": "create_artifact", "params": {"id": "draft", "content": "…"}},
            ),
        ],
    )

    view = _live(run)

    assert view.text == "" and view.pending.subject == "draft"


@pytest.mark.events_by_hand
def test_a_question_whose_parameters_came_cut_cannot_be_approved(user):
    # As a request logged before the limit was raised carries a long URL.
    url = "https://en.wikipedia.org/wiki/Heat_pump?q=" + "x" * 2958
    run = RunFactory(message__conversation__owner=user, status=Run.Status.WAITING_PERMISSION)
    data = {"id": "p", "tool": "web_fetch", "params": {"url": url[:2000]}, "params_truncated": {"url": len(url)}}
    _log(run, [(0, "permission_request", CRAWL, data)])

    question = _live(run).question

    assert (question.target.host, question.params, question.can_approve) == (
        "en.wikipedia.org",
        (("url", url[:2000]),),
        False,
    )
    assert question.unshowable == (
        "This call cannot be approved: its url is 3,000 characters long, too long to show here whole. "
        "Deny it and the agent is told why."
    )


@pytest.mark.events_by_hand
def test_a_long_url_is_named_on_the_lines_by_the_host_it_goes_to(user):
    padding = "Heat_pump_efficiency_" * 140
    hidden = f"https://en.wikipedia.org%2Fwiki%2FHeat_pump%3Fx%3D{padding}@127.0.0.1:8403/page"
    plain = f"https://en.wikipedia.org/wiki/Heat_pump?x={padding}"
    run = RunFactory(message__conversation__owner=user, status=Run.Status.RUNNING)
    _log(
        run,
        [
            (0, "permission_request", CRAWL, {"id": "p", "tool": "web_fetch", "params": {"url": hidden}}),
            (1, "permission_result", CRAWL, {"id": "p", "tool": "web_fetch", "decision": "approve"}),
            (2, "tool_start", CRAWL, {"tool": "web_fetch", "params": {"url": hidden}}),
            (3, "tool_complete", CRAWL, {"tool": "web_fetch", "success": False, "result": "<error>…</error>"}),
            # As web_fetch=auto logs it: cut, so the host cannot be told.
            (4, "tool_start", CRAWL, {"tool": "web_fetch", "params": {"url": hidden[:2000]}}),
            (5, "tool_complete", CRAWL, {"tool": "web_fetch", "success": False, "result": "<error>…</error>"}),
            (6, "tool_start", CRAWL, {"tool": "web_fetch", "params": {"url": plain}}),
        ],
    )

    view = _live(run)

    # One web_fetch refuses names no host it would go to.
    assert [step.subject for step in view.steps] == ["a long URL", "a long URL", "a long URL on en.wikipedia.org"]
    assert view.activity == "crawl_agent · reading a long URL on en.wikipedia.org"


def test_a_real_turn_folds_each_agents_steps(user, demo_model):
    conversation = conversation_start(user=user, content="How efficient are heat pumps?", enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    asking = _live(run).steps[-1].children[-1]
    permission_answer(
        run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="always", enqueue=False
    )
    run = run_execute(run_id=run.pk)

    fold = run_activity(run=run)

    def shape(steps):
        return [(s.kind, s.agent, s.tool, s.status, shape(s.children)) for s in steps]

    # The demo reads the first two sources its search found.
    # The demo reads each document its search found once, however many of its passages were hits.
    fetches = min(2, len({source.url.partition("#")[0] for source in fold.steps[1].children[0].sources}))
    assert fetches
    assert shape(fold.steps) == [
        ("tool", LEAD, "create_artifact", "ok", []),
        ("agent", SEARCH, "", "ok", [("tool", SEARCH, "web_search", "ok", [])]),
        ("tool", LEAD, "update_artifact", "ok", []),
        ("agent", CRAWL, "", "ok", [("tool", CRAWL, "web_fetch", "ok", [])] * fetches),
        ("tool", LEAD, "update_artifact", "ok", []),
        ("tool", LEAD, "create_artifact", "ok", []),
        ("tool", LEAD, "update_artifact", "ok", []),
    ]
    # While it waited, the page listed the fetch as asking.
    assert (asking.tool, asking.status_text) == ("web_fetch", "waiting for your approval")
    assert fold.steps[3].children[0].permission == "always"
    assert fold.steps[3].children[0].page.title
    assert fold.steps[3].body.startswith("### ")


@pytest.mark.events_by_hand
def test_a_compaction_and_a_retry_are_steps_of_the_agent_they_happened_to(user):
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "tool_start", LEAD, {"tool": "call_subagent", "params": {"agent": SEARCH, "instruction": "Find"}}),
            (0, "agent_start", SEARCH, {"instruction": "Find", "from": LEAD}),
            (
                1,
                "compaction",
                SEARCH,
                {"summary": "## Goal\nFind sources.", "tokens_before": 120000, "tokens_after": 9000},
            ),
            (2, "llm_retry", SEARCH, {"reason": "The stream broke off after 12 s."}),
            (3, "llm_retry", LEAD, {"reason": "The stream broke off."}),
        ],
    )

    handover, lead_retry = run_activity(run=run).steps

    compaction, retry = handover.children
    assert (compaction.kind, compaction.agent, compaction.subject) == (
        "compaction",
        SEARCH,
        "summarised its context to make room: 120,000 → 9,000 tokens (estimated)",
    )
    assert "<h2>Goal</h2>" in compaction.body_html
    assert (retry.kind, retry.agent, retry.text) == ("retry", SEARCH, "The stream broke off after 12 s.")
    assert (lead_retry.kind, lead_retry.agent, handover.status) == ("retry", LEAD, "running")


def test_a_compaction_runs_as_a_step_until_it_ends_and_one_that_cut_says_so(user):
    run = RunFactory(message__conversation__owner=user)
    _log(
        run,
        [
            (0, "agent_start", LEAD, {"instruction": "Research"}),
            (1, "compaction_start", LEAD, {"tokens_before": 130000}),
        ],
    )
    [running] = run_activity(run=run).steps
    assert (running.kind, running.status) == ("compaction", "running")
    assert _live(run).activity == "lead_agent · summarising its context to make room"

    failure = "The model service answered 500: overloaded"
    cut = {"summary": "…", "tokens_before": 130000, "tokens_after": 20000, "message_id": 1, "failure": failure}
    _log(run, [(2, "compaction", LEAD, cut)], start=3)

    [cut] = run_activity(run=run).steps
    assert (cut.kind, cut.status, cut.text) == ("compaction", "ok", failure)
    assert cut.subject.startswith("could not summarise its context, so cut it")
    assert _live(run).activity == "lead_agent · thinking"


def _call(agent, model, *, purpose="step", success=True, usage=None, ms=1000):
    return {
        "agent_name": agent,
        "model": model,
        "purpose": purpose,
        "success": success,
        "token_usage": usage,
        "llm_duration_ms": ms,
    }


def test_model_use_adds_up_each_agents_calls_to_each_model():
    usage = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
    metrics = {
        "agent_executions": [
            _call(LEAD, "deepseek-r1", usage={**usage, "reasoning_tokens": 150}),
            _call(SEARCH, "qwen-fast", usage=usage),
            _call(LEAD, "deepseek-r1", purpose="compaction", usage=usage),
            _call(LEAD, "deepseek-r1", success=False, usage=None, ms=300),
            _call(SEARCH, "qwen-fast", usage=None),
        ]
    }

    lead, search = model_use(metrics=metrics)

    assert (lead.agent, lead.model, lead.calls, lead.compactions, lead.failed) == (LEAD, "deepseek-r1", 3, 1, 1)
    assert (lead.prompt_tokens, lead.completion_tokens, lead.reasoning_tokens, lead.duration_ms) == (
        2000,
        400,
        150,
        2300,
    )
    assert (search.calls, search.prompt_tokens, search.reasoning_tokens) == (2, 1000, None)


def test_model_use_reads_the_one_total_per_agent_of_older_runs_and_says_when_nothing_was_reported():
    legacy = {
        "agent_executions": [
            {"agent_name": LEAD, "model": "gpt-4o", "model_calls": 4, "token_usage": None, "llm_duration_ms": 9000}
        ]
    }

    [row] = model_use(metrics=legacy)

    assert (row.calls, row.prompt_tokens, row.failed, row.compactions, row.duration_ms) == (4, None, 0, 0, 9000)
    assert model_use(metrics=None) == [] and model_use(metrics={}) == []


# --- the versions an activity links to ------------------------------------------------


def _written(run, events):
    """Logs an artifact tool's calls as a worker would, now: (tool, params, result XML, artifact_change or None)."""
    seq = 0
    for tool, params, result, change in events:
        data = {"tool": tool, "success": True, "result": result, "truncated": False, "duration_ms": 5}
        if change:
            data["artifact_change"] = change
        for type, event in (("tool_start", {"tool": tool, "params": params}), ("tool_complete", data)):
            seq += 1
            RunEvent.objects.create(run=run, seq=seq, type=type, agent=LEAD, data=event)
    return seq


def _ended(run, seq, *, failed=None):
    flush = {"flushed": [], "conflicts": [], "failed": failed or {}}
    RunEvent.objects.create(run=run, seq=seq + 1, type="complete", agent="", data={"response": "", "artifacts": flush})


def _created(artifact_id, version, title="Report"):
    return (
        "create_artifact",
        {"id": artifact_id, "content": "…", "title": title},
        f'<artifact version="{version}"><id>{artifact_id}</id>Created.</artifact>',
        {"artifact_id": artifact_id, "title": title, "version": version, "length": 1, "removed": 0, "added": 1},
    )


def _links(run) -> list[tuple[str, str, str]]:
    refs = [step.artifact or step.stored for step in run_activity(run=run).steps]
    return [(ref.artifact_id, str(ref.saved) if ref.saved else "", ref.missing) for ref in refs]


@pytest.mark.events_by_hand
def test_what_a_turn_wrote_is_the_version_it_saved_whatever_its_working_count(user):
    """The turn counted its edit as version 2, but another branch took 2 and 3
    meanwhile: it saved version 4, the second on its branch."""
    root = MessageFactory(conversation__owner=user, content="热泵还是燃气？")
    turn = MessageFactory(conversation=root.conversation, parent=root)
    sibling = MessageFactory(conversation=root.conversation, parent=root, shown=False)
    run = RunFactory(message=turn, status=Run.Status.COMPLETED)
    report = Artifact.objects.create(session=root.conversation.artifact_session, artifact_id="report")
    for number, message, by in ((1, root, None), (2, sibling, None), (3, sibling, None), (4, turn, run.pk)):
        artifact_version_save(
            artifact=report,
            content=f"v{number}",
            version=number,
            update_type="update",
            message_id=message.pk,
            run_id=by,
        )
    read = (
        '<artifact id="report" version="1" content_type="text/markdown" title="Report"><content>v1</content></artifact>'
    )
    changed = {"artifact_id": "report", "title": "Report", "version": 2, "length": 2, "removed": 2, "added": 2}
    seq = _written(
        run,
        [
            ("read_artifact", {"id": "report"}, read, None),
            ("update_artifact", {"id": "report", "old_str": "v1", "new_str": "v2"}, '<artifact version="2"/>', changed),
            # A read of what it wrote reads its working copy: that is saved as version 4 too.
            ("read_artifact", {"id": "report"}, read.replace('version="1"', 'version="2"'), None),
            ("read_artifact", {"id": "report", "version": 1}, read, None),
        ],
    )
    _ended(run, seq)

    assert _links(run) == [
        ("report", "version 1 on this branch (v1)", ""),
        ("report", "version 2 on this branch (v4)", ""),
        ("report", "version 2 on this branch (v4)", ""),
        ("report", "version 1 on this branch (v1)", ""),
    ]


@pytest.mark.events_by_hand
@pytest.mark.parametrize(
    "status, failed, missing",
    [
        (Run.Status.RUNNING, None, "not saved yet: the turn saves it when it ends"),
        (Run.Status.FAILED, {"draft": "disk full"}, "not saved: saving it failed"),
        (Run.Status.COMPLETED, None, "deleted since"),
    ],
)
def test_a_write_with_no_saved_version_says_why_and_links_to_none(user, status, failed, missing):
    run = RunFactory(message__conversation__owner=user, status=status)
    seq = _written(run, [_created("draft", 1)])
    if status != Run.Status.RUNNING:
        _ended(run, seq, failed=failed)

    assert _links(run) == [("draft", "", missing)]


@pytest.mark.events_by_hand
def test_a_version_read_is_not_confused_with_one_of_an_artifact_made_again_since(user):
    run = RunFactory(message__conversation__owner=user, status=Run.Status.COMPLETED)
    session = run.message.conversation.artifact_session
    notes = Artifact.objects.create(session=session, artifact_id="notes")
    artifact_version_save(artifact=notes, content="笔记", version=1, update_type="create", message_id=None)
    read = (
        '<artifact id="notes" version="1" content_type="text/markdown" title="Notes"><content>笔记</content></artifact>'
    )
    _ended(run, _written(run, [("read_artifact", {"id": "notes"}, read, None)]))
    found_then = _links(run)
    notes.delete()
    again = Artifact.objects.create(session=session, artifact_id="notes")
    artifact_version_save(artifact=again, content="新的笔记", version=1, update_type="create", message_id=None)

    assert found_then == [("notes", "version 1 on this branch (v1)", "")]
    assert _links(run) == [("notes", "", "deleted since")]


@pytest.mark.events_by_hand
def test_the_activity_of_40_artifacts_costs_the_queries_of_one_of_2(user, django_assert_num_queries):
    def run_of(count):
        run = RunFactory(message__conversation__owner=user, status=Run.Status.COMPLETED)
        session = run.message.conversation.artifact_session
        for n in range(count):
            artifact = Artifact.objects.create(session=session, artifact_id=f"notes_{n}")
            artifact_version_save(
                artifact=artifact,
                content="…",
                version=1,
                update_type="create",
                message_id=run.message_id,
                run_id=run.pk,
            )
        _ended(run, _written(run, [_created(f"notes_{n}", 1) for n in range(count)]))
        return run

    small, large = run_of(2), run_of(40)
    with CaptureQueriesContext(connection) as baseline:
        run_activity(run=small)

    with django_assert_num_queries(len(baseline)):
        links = _links(large)

    assert links == [(f"notes_{n}", "version 1 on this branch (v1)", "") for n in range(40)]


@pytest.mark.parametrize(
    ("chosen", "selected"), [("fast", "fast"), ("deep", "deep"), ("", "deep"), ("removed-since", "deep")]
)
def test_the_composer_offers_the_lead_models_with_the_conversations_choice_or_the_default(
    lead_models, chosen, selected
):
    options = lead_model_options(chosen=chosen)

    assert [(o.name, o.label, o.thinking) for o in options] == [
        ("deep", "深度思考 Deep", True),
        ("fast", "快速 Fast", False),
    ]
    assert [o.name for o in options if o.selected] == [selected]


def test_one_lead_model_or_none_is_no_choice_to_offer(lead_models, settings):
    lead_models.write_text(lead_models.read_text().replace('choices = ["deep", "fast"]', 'choices = ["deep"]'))
    assert lead_model_options(chosen="deep") == []
    settings.MODELS_FILE = ""
    assert lead_model_options(chosen="fast") == []


def _run(user, status, *, title="报告", finished_ago=None):
    conversation = ConversationFactory(owner=user, title=title)
    finished_at = timezone.now() - finished_ago if finished_ago is not None else None
    run = RunFactory(message=MessageFactory(conversation=conversation), status=status, finished_at=finished_at)
    return conversation, run


def test_marks_say_what_waits_for_the_user_and_ignore_what_they_saw_and_others_runs(user, other_user):
    waiting, _ = _run(user, Run.Status.WAITING_PERMISSION, title="等待批准")
    running, _ = _run(user, Run.Status.QUEUED)
    finished, _ = _run(user, Run.Status.FAILED, finished_ago=timedelta(seconds=0))
    seen, _ = _run(user, Run.Status.COMPLETED, finished_ago=timedelta(seconds=0))
    seen.seen_at = timezone.now()
    seen.save(update_fields=["seen_at"])
    # Before marks (seen_at null): never news.
    old, _ = _run(user, Run.Status.COMPLETED, finished_ago=timedelta(days=1))
    old.__class__.objects.filter(pk=old.pk).update(seen_at=None)
    _run(other_user, Run.Status.WAITING_PERMISSION)

    with CaptureQueriesContext(connection) as queries:
        state = selectors.conversation_marks(user=user)

    assert len(queries) == 1
    assert state.marks == {waiting.pk: "waiting", running.pk: "running", finished.pk: "finished"}
    assert state.titles[waiting.pk] == "等待批准" and state.waiting_count == 2


def test_a_conversation_waiting_for_approval_is_marked_so_whatever_ended_before(user):
    conversation, _ = _run(user, Run.Status.COMPLETED, finished_ago=timedelta(seconds=0))
    RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.WAITING_PERMISSION)

    assert selectors.conversation_marks(user=user).marks == {conversation.pk: "waiting"}


# The sample library's order (library_samples loads it by file name): Chinese and English mixed.
SAMPLE_TITLES = [
    "空气源热泵",
    "分布式光伏",
    "Heat pumps",
    "家用储能电池",
    "RAG",
    "Solid-state batteries",
    "固态电池",
    "SQLite WAL mode",
]


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("en", ["Heat pumps", "RAG", "Solid-state batteries", "SQLite WAL mode", "空气源热泵", "分布式光伏"]),
        ("zh-hans", ["空气源热泵", "分布式光伏", "家用储能电池", "固态电池", "Heat pumps", "RAG"]),
    ],
)
def test_a_new_conversation_names_the_readers_language_titles_first_and_counts_the_rest(language, expected):
    for title in SAMPLE_TITLES:
        LibraryDocumentFactory(title=title)

    library = selectors.library_titles(language=language)

    assert library.titles == expected
    assert library.more == 2


def test_a_library_in_one_language_is_named_in_any_language():
    for title in ("家用储能电池", "固态电池"):
        LibraryDocumentFactory(title=title)

    assert selectors.library_titles(language="en") == selectors.LibraryTitles(
        titles=["家用储能电池", "固态电池"], more=0
    )


def test_the_rest_of_a_library_past_the_scanned_titles_is_counted(monkeypatch):
    monkeypatch.setattr(selectors, "LIBRARY_TITLES_SCANNED", 3)
    for title in SAMPLE_TITLES:
        LibraryDocumentFactory(title=title)

    library = selectors.library_titles(language="en", limit=2)

    # Only the oldest three are sorted; all eight are counted.
    assert library.titles == ["Heat pumps", "空气源热泵"]
    assert library.more == 6
