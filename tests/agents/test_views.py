import asyncio
import csv
import datetime
import io
import socket
import time
from xml.sax.saxutils import escape

import lxml.html
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.state import pending_request
from artifacts.services import artifact_delete
from conversations import lifecycle
from conversations.models import ConversationShare
from tests.agents.test_admin import HOSTILE_NAMES
from tests.agents.test_engine import call, run_with_a_cut_compaction
from tests.agents.tools.http_service import Service
from tests.agents.tools.test_http import make_tool
from tests.asgi import conversation_socket, session_cookie
from tests.factories import (
    ConversationFactory,
    MessageFactory,
    RunFactory,
    TokenSpendFactory,
    TokenUseFactory,
    UserFactory,
)
from tests.model_server import Text

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def waiting_run(user, scripted_model, settings):
    settings.TOOL_PERMISSIONS = {"create_artifact": "confirm"}
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")))
    conversation = lifecycle.conversation_start(user=user, content="Draft it", enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_the_page_shows_the_permission_prompt(client, user, waiting_run):
    client.force_login(user)
    html = client.get(reverse("conversation-detail", args=[waiting_run.message.conversation_id])).content.decode()
    assert "create_artifact</strong> needs your approval: lead_agent wants to run it on" in html
    assert '<span class="subject">draft</span>' in html
    # Sent once: the buttons are disabled while the answer is on its way.
    assert 'hx-disabled-elt="form.permission button"' in html
    assert f'value="{pending_request(waiting_run.checkpoint).id}"' in html
    assert 'name="decision" value="always"' in html


def test_a_reader_is_told_the_turn_waits_for_the_owner_and_is_never_asked(client, user, other_user, waiting_run):
    conversation = waiting_run.message.conversation
    ConversationShare.objects.create(conversation=conversation, user=other_user, created_by=user)
    client.force_login(other_user)

    for language in ("en", "zh-hans"):
        page = client.get(conversation.get_absolute_url(), HTTP_ACCEPT_LANGUAGE=language).content.decode()
        turn = lxml.html.fromstring(page).get_element_by_id(f"message-{waiting_run.message_id}")
        activity = client.get(reverse("run-activity", args=[waiting_run.pk]), HTTP_ACCEPT_LANGUAGE=language)
        # The turn's status line, its steps' words and labels, the folded activity.
        for html in (lxml.html.tostring(turn, encoding="unicode"), activity.content.decode()):
            assert "your approval" not in html.lower() and "你的批准" not in html and "你批准" not in html
            assert "owner&#x27;s approval" in html or "owner's approval" in html or "等待所有者批准" in html
    assert "等待所有者批准" in page and "等待所有者批准" in activity.content.decode()
    assert 'form class="permission"' not in page
    # Nothing counted for the reader to see to.
    assert 'id="attention-count" data-count="0"' in page
    # The owner is asked, in their words.
    client.force_login(user)
    owner_page = client.get(conversation.get_absolute_url()).content.decode()
    assert "Waiting for your approval" in owner_page and "owner&#x27;s approval" not in owner_page


def test_approving_from_the_page_queues_the_run_and_shows_the_message(client, user, waiting_run):
    client.force_login(user)
    data = {"request_id": pending_request(waiting_run.checkpoint).id, "decision": "approve"}

    response = client.post(reverse("run-permission", args=[waiting_run.pk]), data, **HTMX)
    repeated = client.post(reverse("run-permission", args=[waiting_run.pk]), data, **HTMX)

    waiting_run.refresh_from_db()
    assert response.status_code == 200 and f'id="message-{waiting_run.message_id}"' in response.content.decode()
    assert waiting_run.status == Run.Status.QUEUED
    assert pending_request(waiting_run.checkpoint).decision == "approve"
    # A repeated answer (a double click, another tab) shows the turn as it is, saying why.
    assert repeated.status_code == 200 and "no longer open" in repeated.content.decode()
    assert 'form class="permission"' not in repeated.content.decode()


# What a hostile model (or a page it read) asks web_fetch to read: about 3,000
# characters that start like a Wikipedia article and may name another host far
# past where a short prompt would stop. `{port}` listens on this machine. Each:
# the URL, the host the prompt must show, whether web_fetch refuses the URL.
PAD = "Heat_pump_efficiency_and_the_coefficient_of_performance_" * 52
HOSTILE_URLS = {
    "a user name spelt like a path": (
        "https://en.wikipedia.org%2Fwiki%2FHeat_pump%3Fsection%3D" + PAD + "@127.0.0.1:{port}/page?exfil=owner-notes",
        "127.0.0.1:{port}",
        True,
    ),
    "backslashes before the @": (
        "https://en.wikipedia.org\\wiki\\Heat_pump;section=" + PAD + "@127.0.0.1:{port}/page?exfil=owner-notes",
        "127.0.0.1:{port}",
        True,
    ),
    # httpx reads the host after the @; a browser reads the backslash as a slash.
    "a backslash before the @": (
        "https://127.0.0.1:{port}\\@en.wikipedia.org/wiki/Heat_pump?section=" + PAD,
        "en.wikipedia.org",
        True,
    ),
    "an @ spelt %40": (
        "https://en.wikipedia.org%40127.0.0.1:{port}/page?section=" + PAD,
        "en.wikipedia.org%40127.0.0.1:{port}",
        True,
    ),
    "an @ in the fragment": (
        "https://en.wikipedia.org/wiki/Heat_pump?section=" + PAD + "#@127.0.0.1:{port}/page",
        "en.wikipedia.org",
        False,
    ),
    "a look-alike name": ("https://аррӏе.com/wiki/Heat_pump?section=" + PAD, "аррӏе.com", False),
}


@pytest.fixture
def listener():
    """A port on this machine that records whether anything connected to it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        yield server


def _connected_to(listener) -> bool:
    try:
        listener.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def _waiting(user, question: str) -> Run:
    """The turn asking `question`, run until it waits for the answer to a permission request."""
    conversation = lifecycle.conversation_start(user=user, content=question, enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING_PERMISSION
    return run


def _fetch_waiting(user, scripted_model, url) -> Run:
    """A turn whose crawl agent asks to read `url` and waits for the answer."""
    scripted_model.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read the heat pump article")),
        Text(call("web_fetch", url=url), chunk_size=1000),
    )
    return _waiting(user, "How efficient are heat pumps?")


def _prompt(html: str):
    """What the permission form says: host shown, its ASCII spelling, the
    parameters as shown, the warnings, and the answers offered."""
    [form] = lxml.html.fragment_fromstring(html, create_parent="div").xpath("//form[@class='permission']")

    def texts(css_class):
        return [" ".join(e.text_content().split()) for e in form.xpath(f".//*[contains(@class, '{css_class}')]")]

    return {
        "host": texts("fetch-host"),
        "ascii": texts("fetch-ascii"),
        "request": texts("http-request"),
        "refused": texts("fetch-refused"),
        "params": [
            (dt.text_content(), dd.text_content())
            for dt, dd in zip(form.xpath(".//dt"), form.xpath(".//dd"), strict=True)
        ],
        "unshowable": texts("unshowable"),
        "decisions": form.xpath(".//button[@name='decision']/@value"),
    }


QUERY_SCHEMA = {
    "type": "object",
    "properties": {
        "which": {"type": "string", "x-in": "path"},
        "limit": {"type": "integer", "x-in": "query"},
        "tags": {"type": "array", "items": {"type": "string"}, "x-in": "query"},
    },
    "required": ["which"],
}


@pytest.fixture
def service():
    running = Service().start()
    yield running
    running.stop()


def _http_waiting(user, scripted_model, service, **params) -> Run:
    """A turn whose lead asks to call a confirm HTTP tool with `params` and waits for the answer."""
    make_tool(
        service.url, path="/api/items/{which}/comments", method="GET", parameters=QUERY_SCHEMA, permission="confirm"
    )
    scripted_model.add(Text(call("ticket_lookup", **params)), Text("Done."))
    return _waiting(user, "看看这个工单的评论")


def test_an_http_tools_prompt_shows_the_request_it_will_send_and_an_approval_sends_exactly_that(
    signed_in, user, scripted_model, service
):
    run = _http_waiting(user, scripted_model, service, which="T-9", limit="3", tags='["数据", "a b"]')

    prompt = _prompt(signed_in.get(reverse("conversation-detail", args=[run.message.conversation_id])).content.decode())
    pending = pending_request(run.checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    run_execute(run_id=run.pk)

    assert prompt["host"] == [service.url.removeprefix("http://")] and prompt["refused"] == []
    [shown] = prompt["request"]
    method, url = shown.split(" ")
    path, query = url.removeprefix(service.url).split("?")
    # The query in the schema's order, which Postgres's jsonb keeps its own way.
    assert (method, path) == ("GET", "/api/items/T-9/comments")
    assert sorted(query.split("&")) == ["limit=3", "tags=%E6%95%B0%E6%8D%AE", "tags=a+b"]
    # Postgres's jsonb keeps the parameters in an order of its own.
    assert dict(prompt["params"]) == {"which": "T-9", "limit": "3", "tags": '["数据", "a b"]'}
    asked = run.events.get(type=RunEvent.Type.PERMISSION_REQUEST)
    assert asked.data["request"] == {"method": "GET", "url": url}
    [received] = service.received
    assert received.method == "GET" and f"{service.url}{received.target}" == url
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED


def test_an_http_tools_prompt_says_a_call_that_will_be_refused_is_and_names_the_host(
    signed_in, user, scripted_model, service
):
    run = _http_waiting(user, scripted_model, service, which="..")

    prompt = _prompt(signed_in.get(reverse("conversation-detail", args=[run.message.conversation_id])).content.decode())

    assert prompt["host"] == [service.url.removeprefix("http://")]
    assert prompt["request"] == [f"GET {service.url}/api/items/{{which}}/comments"]
    [refused] = prompt["refused"]
    assert refused.startswith("This call will be refused, whoever approves it: invalid arguments (which): '..'")
    assert service.received == []


@pytest.mark.parametrize("case", HOSTILE_URLS, ids=list(HOSTILE_URLS))
def test_the_approval_prompt_shows_the_host_a_long_url_really_names_and_the_url_whole(
    signed_in, user, scripted_model, listener, case
):
    port = listener.getsockname()[1]
    url, host, refused = HOSTILE_URLS[case]
    url, host = url.format(port=port), host.format(port=port)
    assert 2900 < len(url) < 3500
    run = _fetch_waiting(user, scripted_model, url)

    prompt = _prompt(signed_in.get(reverse("conversation-detail", args=[run.message.conversation_id])).content.decode())

    # The host the fetch would go to, first and alone; the URL whole, as the model wrote it.
    assert prompt["host"] == [host]
    assert prompt["params"] == [("url", url)]
    assert bool(prompt["refused"]) == refused
    # A name in other scripts is spelt out as DNS is asked for it.
    assert prompt["ascii"] == (["In ASCII, as it is looked up: xn--80ak6aa92e.com"] if "аррӏе" in url else [])
    assert prompt["decisions"] == ["approve", "always", "deny"]


def test_approving_a_url_with_a_user_before_its_host_reads_nothing_and_tells_the_model_why(
    client, user, scripted_model, listener, settings
):
    settings.FETCH_ALLOWED_HOSTS = ["127.0.0.1"]  # only the user part stands in the way
    settings.FETCH_TIMEOUT = 2.0
    port = listener.getsockname()[1]
    url = HOSTILE_URLS["a user name spelt like a path"][0].format(port=port)
    run = _fetch_waiting(user, scripted_model, url)
    scripted_model.add(Text("That address was refused."), Text("I could not read the article."))

    client.force_login(user)
    data = {"request_id": pending_request(run.checkpoint).id, "decision": "approve"}
    client.post(reverse("run-permission", args=[run.pk]), data, **HTMX)
    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert not _connected_to(listener)
    [fetched] = run.events.filter(type=RunEvent.Type.TOOL_COMPLETE, data__tool="web_fetch")
    assert not fetched.data["success"]
    told = scripted_model.requests[-2]["messages"][-1]["content"]
    assert "web_fetch" in told and "user name or password" in told


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_pushes_the_same_prompt_as_the_page(async_client, user, scripted_model, listener):
    port = listener.getsockname()[1]
    url = HOSTILE_URLS["a user name spelt like a path"][0].format(port=port)
    run = await sync_to_async(_fetch_waiting)(user, scripted_model, url)
    conversation_id = await sync_to_async(lambda: run.message.conversation_id)()
    await async_client.aforce_login(user)
    page = await async_client.get(reverse("conversation-detail", args=[conversation_id]))
    watcher = conversation_socket(conversation_id, cookie=session_cookie(async_client))
    assert (await watcher.connect())[0]
    pushed = await watcher.receive_from(timeout=5)
    while 'class="permission"' not in pushed:
        pushed = await watcher.receive_from(timeout=5)
    await watcher.disconnect()

    shown = _prompt(pushed)
    assert shown == _prompt(page.content.decode())
    assert shown["host"] == [f"127.0.0.1:{port}"] and shown["params"] == [("url", url)]


def test_a_call_too_long_to_show_whole_can_only_be_denied_and_the_model_is_told_why(
    client, user, scripted_model, settings
):
    settings.TOOL_PERMISSIONS = {"create_artifact": "confirm"}
    content = "The heat pump report, 热泵报告. " * 3000
    scripted_model.add(Text(call("create_artifact", id="report", content=content), chunk_size=50_000))
    conversation = lifecycle.conversation_start(user=user, content="Write the report", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)
    client.force_login(user)
    request_id = pending_request(run.checkpoint).id
    page = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()

    prompt = _prompt(page)
    assert prompt["decisions"] == ["deny"]
    assert prompt["unshowable"] == [
        f"This call cannot be approved: its content is {len(content):,} characters long, "
        "too long to show here whole. Deny it and the agent is told why."
    ]
    # A forged answer gets no further than the buttons.
    for decision in ("approve", "always"):
        forged = client.post(
            reverse("run-permission", args=[run.pk]), {"request_id": request_id, "decision": decision}, **HTMX
        )
        assert "This call cannot be approved" in forged.content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING_PERMISSION

    scripted_model.add(Text("I will write it in parts."))
    client.post(reverse("run-permission", args=[run.pk]), {"request_id": request_id, "decision": "deny"}, **HTMX)
    run = run_execute(run_id=run.pk)
    assert run.status == Run.Status.COMPLETED
    told = scripted_model.requests[-1]["messages"][-1]["content"]
    assert "The user denied this call. It could not be approved: its parameter content" in told


@pytest.mark.events_by_hand
def test_parameters_are_shown_as_data_whatever_their_names(signed_in, user):
    run = RunFactory(message__conversation__owner=user, status=Run.Status.WAITING_PERMISSION)
    params = {"items": "all of them", "keys": "<b>k</b>", "values": 3}
    RunEvent.objects.create(
        run=run,
        seq=1,
        type="permission_request",
        agent="lead_agent",
        data={"id": "p", "tool": "odd_tool", "params": params},
    )

    prompt = _prompt(signed_in.get(reverse("conversation-detail", args=[run.message.conversation_id])).content.decode())

    # (in the order the database keeps them: Postgres's jsonb sorts keys its own way)
    assert sorted(prompt["params"]) == [("items", "all of them"), ("keys", "<b>k</b>"), ("values", "3")]


def test_another_user_gets_a_404_for_both_controls(client, other_user, waiting_run):
    client.force_login(other_user)
    data = {"request_id": pending_request(waiting_run.checkpoint).id, "decision": "approve"}
    assert client.post(reverse("run-permission", args=[waiting_run.pk]), data).status_code == 404
    assert client.post(reverse("run-cancel", args=[waiting_run.pk])).status_code == 404
    waiting_run.refresh_from_db()
    assert waiting_run.status == Run.Status.WAITING_PERMISSION


def test_cancel_needs_a_post_with_a_csrf_token(user, waiting_run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    url = reverse("run-cancel", args=[waiting_run.pk])
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 403


def test_cancelling_a_waiting_run_ends_it(client, user, waiting_run):
    client.force_login(user)
    response = client.post(reverse("run-cancel", args=[waiting_run.pk]))
    waiting_run.refresh_from_db()
    assert response.status_code == 302
    assert waiting_run.status == Run.Status.CANCELLED


def test_the_activity_of_a_turn_with_its_metrics_for_its_owner_only(client, user, other_user, scripted_model):
    long_content = "word " * 200
    scripted_model.add(
        Text(call("create_artifact", id="notes", content=long_content)),
        Text(call("read_artifact", id="notes")),
        Text("Done."),
    )
    conversation = lifecycle.conversation_start(user=user, content="Take notes", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)
    url = reverse("run-activity", args=[run.pk])

    client.force_login(other_user)
    assert client.get(url).status_code == 404
    client.force_login(user)
    page = client.get(url).content.decode()

    assert page.count('class="run-step step-tool') == 2
    # Both calls name the artifact, linked to open the version the turn saved in the pane.
    pane = reverse("artifact-detail", args=[conversation.pk, "notes"])
    assert page.count(f'hx-get="{pane}?version=1" hx-target="#artifact-pane"') == 2
    assert page.count("version 1 on this branch (v1)") == 2
    assert "word word" not in page, "the artifact's text is the pane's to show"
    assert "<caption>Model use</caption>" in page and "lead_agent" in page and "2 tool calls" in page
    detail = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert f'hx-get="{url}"' in detail


def test_the_activity_counts_a_summary_and_a_failed_call_among_the_model_calls(client, user, small_window):
    run = run_with_a_cut_compaction(user, small_window)
    client.force_login(user)

    page = client.get(reverse("run-activity", args=[run.pk])).content.decode()

    assert "<td>3 <span" in page and "(1 summary)" in page and "(1 failed or stopped)" in page
    assert "could not summarise its context, so cut it" in page


@pytest.mark.django_db(transaction=True)
async def test_a_cancel_through_the_asgi_app_answers_at_once_and_leaves_other_requests_working(async_client, user):
    # The web process announces through the realtime module's own loop: the
    # request neither waits for the channel layer nor binds a loop to its thread.
    conversation = await sync_to_async(lifecycle.conversation_start)(user=user, content="Stop", enqueue=False)
    run = await sync_to_async(conversation.active_branch.runs.get)()
    await async_client.aforce_login(user)
    watcher = conversation_socket(conversation.pk, cookie=session_cookie(async_client))
    assert (await watcher.connect())[0]
    while "artifacts-changed" not in await watcher.receive_from(timeout=5):
        pass
    started = time.monotonic()
    response = await asyncio.wait_for(
        async_client.post(reverse("run-cancel", args=[run.pk]), headers={"HX-Request": "true"}), timeout=5
    )
    elapsed = time.monotonic() - started
    pages = [await async_client.get(reverse("conversation-detail", args=[conversation.pk])) for _ in range(3)]
    assert response.status_code == 200 and 'data-status="cancelled"' in response.content.decode()
    assert elapsed < 2, f"the cancel took {elapsed:.1f} s"
    assert [page.status_code for page in pages] == [200, 200, 200]
    # The open page is told, through the channel layer, once the cancel committed
    # (beside the list's marks, which the same socket carries).
    pushed = await watcher.receive_from(timeout=5)
    while 'id="message-' not in pushed:
        pushed = await watcher.receive_from(timeout=5)
    await watcher.disconnect()
    assert f'id="message-{conversation.active_branch_id}"' in pushed and 'data-status="cancelled"' in pushed
    await sync_to_async(run.refresh_from_db)()
    assert run.status == Run.Status.CANCELLED


@pytest.mark.events_by_hand
def test_the_activity_shows_sources_and_reports_as_text_and_links_only_to_the_web(signed_in, user):
    """A page's title, URL and snippet, and a subagent's report, are what
    strangers wrote: the activity shows them, it never runs them."""
    hostile = '<img src=x onerror="alert(1)">'
    results = (
        '<search_results provider="searxng" query="q">'
        f"<result><title>{escape(hostile)}</title><url>javascript:alert(1)</url><snippet>{escape('<script>x()</script>')}</snippet></result>"
        "<result><title>Heat pumps &amp; you</title><url>https://example.org/heat?a=1&amp;b=2</url><snippet>COP.</snippet></result>"
        "</search_results>"
    )
    run = RunFactory(message__conversation__owner=user, status=Run.Status.COMPLETED)
    events = [
        (
            "tool_start",
            "lead_agent",
            {"tool": "call_subagent", "params": {"agent": "search_agent", "instruction": "Find"}},
        ),
        ("agent_start", "search_agent", {"instruction": "Find", "from": "lead_agent"}),
        ("tool_start", "search_agent", {"tool": "web_search", "params": {"query": "q"}}),
        ("tool_complete", "search_agent", {"tool": "web_search", "success": True, "result": results}),
        (
            "agent_complete",
            "search_agent",
            {"response": f"**Found** [it](javascript:alert(1)) {hostile}<script>x()</script>"},
        ),
        ("tool_complete", "lead_agent", {"tool": "call_subagent", "success": True, "result": "<subagent_result>…"}),
    ]
    for seq, (type, agent, data) in enumerate(events, start=1):
        RunEvent.objects.create(run=run, seq=seq, type=type, agent=agent, data=data)

    html = signed_in.get(reverse("run-activity", args=[run.pk])).content.decode()
    tree = lxml.html.fragment_fromstring(html, create_parent="div")

    assert "<img" not in html and "<script" not in html and "javascript:" not in "".join(tree.xpath("//a/@href"))
    assert [a.text_content() for a in tree.xpath("//ul[@class='step-sources']//a")] == ["Heat pumps & you"]
    assert tree.xpath("//ul[@class='step-sources']//a/@href") == ["https://example.org/heat?a=1&b=2"]
    assert hostile in tree.xpath("//ul[@class='step-sources']/li[1]")[0].text_content()
    # The report is rendered Markdown: emphasis kept, the rest inert.
    report = tree.xpath("//details[contains(@class, 'step-report')]/div")[0]
    assert report.xpath(".//strong")[0].text == "Found" and hostile in report.text_content()
    # The search sits under the hand-over to its agent.
    assert (
        tree.xpath("//li[contains(@class, 'step-agent')]//li[contains(@class, 'step-tool')]//code")[0].text
        == "web_search"
    )


def test_the_activity_of_a_turn_calling_tools_named_like_a_dicts_methods(signed_in, user, scripted_model):
    scripted_model.add(*(Text(call(name)) for name in HOSTILE_NAMES), Text("Done."))
    conversation = lifecycle.conversation_start(user=user, content="Call them", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)

    response = signed_in.get(reverse("run-activity", args=[run.pk]))

    assert response.status_code == 200
    tree = lxml.html.fragment_fromstring(response.content.decode(), create_parent="div")
    assert tree.xpath("//li[contains(@class, 'step-tool')]//code/text()") == list(HOSTILE_NAMES)


@pytest.mark.events_by_hand
def test_the_activity_lists_parameters_named_like_a_dicts_methods(signed_in, user):
    params = {name: f"value of {name}" for name in HOSTILE_NAMES}
    run = RunFactory(message__conversation__owner=user, status=Run.Status.COMPLETED)
    RunEvent.objects.create(
        run=run, seq=1, type="tool_start", agent="lead_agent", data={"tool": "lookup", "params": params}
    )
    RunEvent.objects.create(
        run=run,
        seq=2,
        type="tool_complete",
        agent="lead_agent",
        data={"tool": "lookup", "success": True, "result": "ok"},
    )

    response = signed_in.get(reverse("run-activity", args=[run.pk]))

    assert response.status_code == 200
    tree = lxml.html.fragment_fromstring(response.content.decode(), create_parent="div")
    listed = tree.xpath("//details[@class='step-params']/dl")[0]
    assert dict(zip(listed.xpath("dt/text()"), listed.xpath("dd/text()"), strict=True)) == params


REPORT = "# 研究报告\n\n热泵在零下十度仍然有效。\n"


def _turn(conversation, content):
    message = lifecycle.message_post(
        conversation=conversation, content=content, parent=lifecycle.ACTIVE_BRANCH, enqueue=False
    )
    return run_execute(run_id=message.runs.get().pk)


def _artifact_links(html) -> list[tuple[str, str, str]]:
    """Each artifact a step names: (its title, the pane URL it opens or "", what it says of the version)."""
    tree = lxml.html.fragment_fromstring(html, create_parent="div")
    return [
        (
            p.xpath("string(a)") or p.text.strip(),
            p.xpath("string(a/@hx-get)"),
            p.xpath("string(span[@class='meta'])"),
        )
        for p in tree.xpath("//p[@class='step-artifact']")
    ]


def test_a_turns_activity_opens_the_version_it_saved_after_later_turns_wrote_newer_ones(
    signed_in, user, other_user, scripted_model
):
    scripted_model.add(
        Text(call("create_artifact", id="research_report", title="Research report", content=REPORT)),
        Text("第一稿。"),
        # Two edits, saved as one version at the turn's end.
        Text(call("update_artifact", id="research_report", old_str="有效", new_str="高效")),
        Text(call("update_artifact", id="research_report", old_str="十度", new_str="十五度")),
        Text("第二稿。"),
        *(
            reply
            for n in (3, 4, 5)
            for reply in (
                Text(call("rewrite_artifact", id="research_report", content=f"# 研究报告\n\n第{n}稿。\n")),
                Text(f"第{n}稿完成。"),
            )
        ),
    )
    conversation = lifecycle.conversation_start(user=user, content="热泵还是燃气？", enqueue=False)
    run_execute(run_id=conversation.active_branch.runs.get().pk)
    turn_2 = _turn(conversation, "再改一下")
    for n in (3, 4, 5):
        _turn(conversation, f"第{n}次修改")

    html = signed_in.get(reverse("run-activity", args=[turn_2.pk])).content.decode()

    pane = reverse("artifact-detail", args=[conversation.pk, "research_report"])
    saved = turn_2.artifact_versions.get()
    assert saved.version == 3
    assert _artifact_links(html) == [("Research report", f"{pane}?version=3", "version 2 on this branch (v3)")] * 2
    opened = signed_in.get(f"{pane}?version=3", **HTMX).content.decode()
    assert "热泵在零下十五度仍然高效。" in opened
    assert "You are viewing version 2 of 5 on this branch (v3) — not the current text." in opened
    # Another user gets neither the activity nor the version it links to.
    client = Client()
    client.force_login(other_user)
    assert client.get(reverse("run-activity", args=[turn_2.pk])).status_code == 404
    assert client.get(f"{pane}?version=3", **HTMX).status_code == 404
    export = reverse("artifact-export-docx", args=[conversation.pk, "research_report"])
    assert client.get(f"{export}?version=3").status_code == 404


def test_an_artifact_deleted_since_the_turn_is_named_but_not_linked(signed_in, user, scripted_model):
    scripted_model.add(
        Text(call("create_artifact", id="notes", title="Notes", content="笔记")),
        Text(call("read_artifact", id="notes")),
        Text("Done."),
    )
    conversation = lifecycle.conversation_start(user=user, content="记下来", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)
    artifact = run.artifact_versions.get().artifact
    artifact_delete(artifact=artifact, active_runs=())

    html = signed_in.get(reverse("run-activity", args=[run.pk])).content.decode()

    assert _artifact_links(html) == [("Notes", "", "deleted since")] * 2
    assert reverse("artifact-detail", args=[conversation.pk, "notes"]) not in html


def _cancelled_under_a_later_turn(user):
    """Turn 7 cancelled and turn 8 answered on top of it; the page shows turn 8."""
    conversation = ConversationFactory(owner=user)
    old = MessageFactory(conversation=conversation, content="第七问：热泵在零下能用吗？")
    run = RunFactory(message=old, status=Run.Status.CANCELLED)
    later = MessageFactory(conversation=conversation, parent=old, content="And for a flat?", response="Turn 8.")
    RunFactory(message=later, status=Run.Status.COMPLETED)
    return run, later


def test_retrying_an_old_turn_shows_its_new_branch_and_says_so(signed_in, user):
    run, later = _cancelled_under_a_later_turn(user)
    conversation = later.conversation

    response = signed_in.post(reverse("run-retry", args=[run.pk]), **HTMX)

    html = response.content.decode()
    conversation.refresh_from_db()
    branch = conversation.active_branch
    assert response.status_code == 200 and response.headers["HX-Retarget"] == "#thread"
    assert branch.parent_id is None and branch.content == run.message.content
    assert response.headers["HX-Push-Url"].startswith(conversation.get_absolute_url())
    thread = lxml.html.fragment_fromstring(html, create_parent=True)
    assert thread.get_element_by_id("thread") is not None
    assert [a.get("id") for a in thread.xpath("//article")] == [f"message-{branch.pk}"]
    assert "Tried again as a new branch; your later turns stay on the branch you came from." in html
    assert "2/2" in html and 'id="artifact-pane"' in html
    # The old branch keeps turn 8, and its cancelled turn offers no second retry.
    signed_in.post(reverse("branch-switch", args=[conversation.pk]), {"message": run.message_id})
    page = signed_in.get(conversation.get_absolute_url()).content.decode()
    assert "Turn 8." in page and "Tried again as a new branch beside this one." in page
    assert reverse("run-retry", args=[run.pk]) not in page
    again = signed_in.post(reverse("run-retry", args=[run.pk]), **HTMX)
    assert again.status_code == 409 and "tried again already" in again.content.decode()


def test_retrying_the_newest_turn_answers_in_place(signed_in, user):
    _, later = _cancelled_under_a_later_turn(user)
    newest = RunFactory(message=later, status=Run.Status.FAILED, error="The model answered 500.")

    response = signed_in.post(reverse("run-retry", args=[newest.pk]), **HTMX)

    assert response.status_code == 200 and "HX-Retarget" not in response.headers
    assert f'id="message-{later.pk}"' in response.content.decode() and later.runs.count() == 3
    assert later.conversation.messages.count() == 2


def test_another_user_cannot_retry_and_a_retry_needs_a_csrf_token(client, user, other_user):
    run, later = _cancelled_under_a_later_turn(user)
    url = reverse("run-retry", args=[run.pk])

    client.force_login(other_user)
    assert client.post(url, **HTMX).status_code == 404
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.get(url).status_code == 405
    assert strict.post(url, **HTMX).status_code == 403
    assert later.conversation.messages.count() == 2 and Run.objects.count() == 2


def test_the_activity_shows_each_model_calls_thinking_folded_as_text(signed_in, user, scripted_model):
    scripted_model.add(
        Text("<think>先写笔记 <script>x()</script></think>" + call("create_artifact", id="notes", content="WAL")),
        Text("答案。", reasoning="笔记写好了。", reasoning_field="reasoning"),
    )
    conversation = lifecycle.conversation_start(user=user, content="WAL?", enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)

    html = signed_in.get(reverse("run-activity", args=[run.pk])).content.decode()
    tree = lxml.html.fragment_fromstring(html, create_parent="div")

    steps = tree.xpath("//ol[@class='activity-steps']/li")
    assert [li.get("class").split()[1] for li in steps] == ["step-thinking", "step-tool", "step-thinking"]
    folds = tree.xpath("//details[contains(@class, 'thinking')]")
    assert [fold.get("open") for fold in folds] == [None, None]
    assert [fold.xpath(".//div[@class='thinking-text']")[0].text_content() for fold in folds] == [
        "先写笔记 <script>x()</script>",
        "笔记写好了。",
    ]
    assert "<script" not in html
    assert folds[0].xpath("./summary")[0].text_content().startswith("lead_agent Thought for ")


def test_the_activity_names_the_lead_model_the_conversation_chose(signed_in, user, lead_models, scripted_model):
    scripted_model.add(Text("热泵很高效。"))
    conversation = lifecycle.conversation_start(user=user, content="热泵的效率？", lead_model="fast", enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)

    html = signed_in.get(reverse("run-activity", args=[run.pk]), **HTMX).content.decode()

    assert '<p class="activity-model">The lead agent answered with 快速 Fast (fast-model).</p>' in html


# --- usage -------------------------------------------------------------------------------


@pytest.fixture
def two_peoples_use(user, other_user, settings, tmp_path):
    """A month of two people's calls, the deep model priced in euros."""
    path = tmp_path / "models.toml"
    path.write_text('currency = "EUR"\n[prices."deep-model"]\ninput = 3\noutput = 15\n')
    settings.MODELS_FILE = str(path)
    other_user.username = "王芳"
    other_user.save()
    today = timezone.localdate()
    TokenUseFactory(user=user, day=today, input_tokens=2_000_000, output_tokens=100_000)
    TokenUseFactory(user=other_user, day=today, model="fast-model", kind="search_agent", input_tokens=7_777)
    return user, other_user


def _usage_rows(html: str, table: str) -> dict[str, list[str]]:
    page = lxml.html.fromstring(html)
    rows = page.xpath(f'//table[@data-table="{table}"]/tbody/tr')
    return {row.get("data-key"): [cell.text_content().strip() for cell in row] for row in rows}


def test_whoever_may_view_token_use_sees_everyones_by_person_with_costs(client, two_peoples_use):
    user, other = two_peoples_use
    client.force_login(UserFactory(is_staff=True, is_superuser=True))

    html = client.get(reverse("usage")).content.decode()

    people = _usage_rows(html, "person")
    assert set(people) == {str(user.pk), str(other.pk)}
    assert people[str(other.pk)][0] == "王芳" and people[str(user.pk)][6] == "7.50"
    assert "No price is set for fast-model" in html
    one = client.get(reverse("usage"), {"person": other.pk}).content.decode()
    assert set(_usage_rows(one, "person")) == {str(other.pk)}


def test_a_staff_member_given_the_permission_sees_everyone_and_one_without_only_themself(client, two_peoples_use):
    staff = UserFactory(is_staff=True)
    client.force_login(staff)
    assert "王芳" not in client.get(reverse("usage")).content.decode()

    staff.user_permissions.add(Permission.objects.get(codename="view_tokenuse"))
    # Permissions are cached on the user object: a fresh one, as the next request would load.
    client.force_login(type(staff).objects.get(pk=staff.pk))
    assert "王芳" in client.get(reverse("usage")).content.decode()


def test_a_person_sees_their_own_use_and_another_persons_or_a_group_is_a_404(signed_in, two_peoples_use):
    user, other = two_peoples_use

    html = signed_in.get(reverse("usage")).content.decode()

    assert "Your usage" in html and "王芳" not in html and "7,777" not in html
    assert _usage_rows(html, "model").keys() == {"deep-model"}
    assert not _usage_rows(html, "person")
    assert signed_in.get(reverse("usage"), {"person": other.pk}).status_code == 404
    assert signed_in.get(reverse("usage"), {"group": 1}).status_code == 404
    assert signed_in.get(reverse("usage"), {"person": user.pk}).status_code == 200
    csv_text = signed_in.get(reverse("usage"), {"person": other.pk, "format": "csv"})
    assert csv_text.status_code == 404


def test_the_csv_is_what_the_page_shows(client, two_peoples_use):
    _, other = two_peoples_use
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    query = {"grain": "day", "model": "fast-model"}

    page = _usage_rows(client.get(reverse("usage"), query).content.decode(), "person")
    response = client.get(reverse("usage"), {**query, "format": "csv"})

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="usage-')
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    people = {row[1]: row for row in rows if row[0] == "person"}
    assert people.keys() == page.keys() == {str(other.pk)}
    assert people[str(other.pk)][2] == "王芳" and int(people[str(other.pk)][8]) == 7_977
    assert page[str(other.pk)][5] == "7,977"


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ({"start": "2026-11-20", "end": "2026-11-01"}, "start is after its end"),
        ({"start": "2020-01-01", "end": "2026-11-01"}, "at most three years"),
        ({"start": "not a date"}, "Enter a valid date"),
        ({"grain": "<script>"}, "Select a valid choice"),
    ],
)
def test_a_wrong_period_is_refused_with_the_reason(signed_in, query, problem):
    response = signed_in.get(reverse("usage"), query)

    assert response.status_code == 400 and problem in response.content.decode()
    assert "<script>" not in response.content.decode()


def test_a_long_period_by_day_is_shown_by_week(signed_in, two_peoples_use):
    today = timezone.localdate()
    start = today - datetime.timedelta(days=200)

    html = signed_in.get(reverse("usage"), {"start": start.isoformat(), "grain": "day"}).content.decode()

    weeks = _usage_rows(html, "period")
    assert "By week" in html and all(datetime.date.fromisoformat(key).weekday() == 0 for key in weeks)


@pytest.mark.parametrize(("spent", "shown"), [(7_900, False), (8_500, True)])
def test_a_person_past_most_of_todays_budget_is_told_under_the_composer_and_in_settings(
    signed_in, user, settings, spent, shown
):
    settings.DAILY_TOKEN_BUDGET = 10_000
    TokenSpendFactory(user=user, tokens=spent)

    chat = signed_in.get(reverse("chat")).content.decode()
    page = signed_in.get(reverse("settings")).content.decode()

    notice = "You have used 85% of today&#x27;s token budget: 8,500 of 10,000 tokens."
    assert (notice in chat) is shown and (notice in page) is shown
    assert f"Today you have used {spent:,} of your 10,000 tokens a day." in page
