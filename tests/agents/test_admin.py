import json
from datetime import timedelta

import lxml.html
import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.admin import QUESTION_LIST_CHARS
from agents.models import HttpTool, Run, RunEvent, TokenBudget
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.state import pending_request
from conversations import lifecycle
from conversations.models import Message
from tests.agents.test_engine import call, run_with_a_cut_compaction
from tests.agents.tools.http_service import Service
from tests.factories import (
    ConversationFactory,
    LibraryDocumentFactory,
    MessageFactory,
    RunFactory,
    TokenSpendFactory,
    UserFactory,
)
from tests.model_server import Text

pytestmark = pytest.mark.django_db

# The apps whose admin is ours.
OUR_APPS = ("conversations", "artifacts", "agents", "audit", "retention", "projects")


def _text(response) -> str:
    return " ".join(lxml.html.fromstring(response.content).text_content().split())


def staff_with(*permissions: str):
    """A staff member (not a superuser) holding only these permissions, each "app_label.codename"."""
    user = UserFactory(is_staff=True)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


def view_only_staff():
    """A staff member who may view every model of ours and do nothing else."""
    views = Permission.objects.filter(content_type__app_label__in=OUR_APPS, codename__startswith="view_")
    return staff_with(*(f"{p.content_type.app_label}.{p.codename}" for p in views.select_related("content_type")))


def actions_offered(response) -> list[str]:
    """The actions a changelist's select offers, the empty choice left out."""
    return [v for v in lxml.html.fromstring(response.content).xpath("//select[@name='action']/option/@value") if v]


def _researched_run(user, scripted_model):
    """A real turn: a plan written, a library page read once the user approved it, an answer."""
    document = LibraryDocumentFactory(title="Heat pumps", content="Heat pumps move heat.")
    scripted_model.add(
        Text(call("create_artifact", id="task_plan", content="- [ ] read the library")),
        Text(call("call_subagent", agent="crawl_agent", instruction="Read the heat pump page")),
        Text(call("web_fetch", url=f"library://{document.pk}")),
        Text("The page says heat pumps move heat."),
        Text("Heat pumps move heat rather than make it."),
    )
    conversation = lifecycle.conversation_start(user=user, content="How do heat pumps work?", enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    pending = pending_request(Run.objects.get(pk=run.pk).checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    return run, document


def test_the_run_page_is_a_trace_of_what_the_run_did(staff_client, user, scripted_model):
    run, document = _researched_run(user, scripted_model)

    response = staff_client.get(reverse("admin:agents_run_change", args=[run.pk]))
    page = lxml.html.fromstring(response.content)
    text = _text(response)

    assert response.status_code == 200
    assert user.username in text and "How do heat pumps work?" in text
    assert reverse("admin:conversations_conversation_change", args=[run.message.conversation_id]) in response.text
    assert "scripted-model" in text or run.model in text
    tools = {
        row.xpath("td[1]")[0].text_content(): row.xpath("td[2]")[0].text_content()
        for row in page.xpath("//h3[.='Tools']/following-sibling::table[1]/tbody/tr")
    }
    assert tools == {"create_artifact": "1", "call_subagent": "1", "web_fetch": "1"}
    agents = page.xpath("//h3[.='Agents']/following-sibling::table[1]/tbody/tr/td[1]/text()")
    assert agents == ["lead_agent", "crawl_agent"]
    [decision] = page.xpath("//h3[.='Permission decisions']/following-sibling::table[1]/tbody/tr")
    cells = [td.text_content() for td in decision.xpath("td")]
    assert cells[0] == "web_fetch" and cells[3] == "approve" and cells[4] == user.username and cells[5] != "—"
    assert f"library://{document.pk}" in " ".join(
        page.xpath("//h3[.='Sources fetched']/following-sibling::ul[1]//text()")
    )
    version = run.artifact_versions.get()
    assert reverse("admin:artifacts_artifactversion_change", args=[version.pk]) in response.text
    timeline = " ".join(page.xpath("//table[@class='timeline']//text()"))
    assert "web_fetch ok" in timeline and "completed in" in timeline and "Heat pumps move heat" in timeline
    # The checkpoint is shown formatted, not as a form field.
    assert not page.xpath("//textarea") and page.xpath("//div[contains(@class,'field-checkpoint_json')]//pre")


@pytest.mark.events_by_hand
def test_a_failed_run_shows_its_error(staff_client):
    run = RunFactory(status=Run.Status.FAILED, error="The model server answered 500.", finished_at=timezone.now())
    RunEvent.objects.create(run=run, seq=1, type=RunEvent.Type.ERROR, data={"message": run.error})
    page = staff_client.get(reverse("admin:agents_run_change", args=[run.pk])).content.decode()
    text = " ".join(lxml.html.fromstring(page).text_content().split())
    assert "Errors The model server answered 500." in text


@pytest.mark.events_by_hand
def test_the_trace_of_a_long_run_takes_a_few_queries(staff_client, django_assert_max_num_queries):
    run = RunFactory(status=Run.Status.COMPLETED, finished_at=timezone.now())
    events = []
    for n in range(500):
        events += [
            RunEvent(
                run=run, seq=4 * n + 1, type=RunEvent.Type.LLM_CHUNK, agent="lead_agent", data={"content": "x" * 50}
            ),
            RunEvent(
                run=run,
                seq=4 * n + 2,
                type=RunEvent.Type.LLM_COMPLETE,
                agent="lead_agent",
                data={
                    "content": "call",
                    "token_usage": {"prompt_tokens": 10, "completion_tokens": 2},
                    "duration_ms": 5,
                },
            ),
            RunEvent(
                run=run,
                seq=4 * n + 3,
                type=RunEvent.Type.TOOL_START,
                agent="lead_agent",
                data={"tool": "web_fetch", "params": {"url": f"https://example.com/{n}"}},
            ),
            RunEvent(
                run=run,
                seq=4 * n + 4,
                type=RunEvent.Type.TOOL_COMPLETE,
                agent="lead_agent",
                data={"tool": "web_fetch", "success": True, "result": "page", "duration_ms": 3},
            ),
        ]
    RunEvent.objects.bulk_create(events)
    with django_assert_max_num_queries(12):
        response = staff_client.get(reverse("admin:agents_run_change", args=[run.pk]))
    page = lxml.html.fromstring(response.content)
    assert len(page.xpath("//table[@class='timeline']/tbody/tr")) == 1500
    assert page.xpath("//h3[.='Agents']/following-sibling::table[1]/tbody/tr/td[3]/text()") == ["5000"]


def test_runs_events_and_versions_are_read_only(staff_client, user, scripted_model):
    run, _ = _researched_run(user, scripted_model)
    version = run.artifact_versions.get()
    event = run.events.first()
    for model, obj in (("agents_run", run), ("agents_runevent", event), ("artifacts_artifactversion", version)):
        assert staff_client.get(reverse(f"admin:{model}_add")).status_code == 403
        changelist = staff_client.get(reverse(f"admin:{model}_changelist"))
        assert reverse(f"admin:{model}_add") not in changelist.text
        assert (
            staff_client.post(
                reverse(f"admin:{model}_change", args=[obj.pk]), {"status": "failed", "content": "x", "type": "error"}
            ).status_code
            == 403
        )
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
    assert staff_client.get(reverse("admin:agents_run_delete", args=[run.pk])).status_code == 403


def test_the_run_list_shows_who_what_and_how_long(staff_client, user, scripted_model):
    run, _ = _researched_run(user, scripted_model)
    RunFactory(
        status=Run.Status.FAILED,
        error="Boom",
        message=MessageFactory(conversation=ConversationFactory(owner=UserFactory(username="bo"))),
    )
    response = staff_client.get(reverse("admin:agents_run_changelist"), {"q": user.username})
    rows = lxml.html.fromstring(response.content).xpath("//table[@id='result_list']/tbody/tr")
    assert len(rows) == 1
    row = " ".join(rows[0].text_content().split())
    assert user.username in row and "completed" in row.lower()
    tokens = sum(e["token_usage"]["total_tokens"] for e in run.metrics["agent_executions"])
    assert str(tokens) in row and " s" in row
    failed = staff_client.get(reverse("admin:agents_run_changelist"), {"status__exact": "failed"})
    [row] = lxml.html.fromstring(failed.content).xpath("//table[@id='result_list']/tbody/tr")
    assert row.xpath("td[@class='field-user']/text()") == ["bo"] and row.xpath(
        "td[@class='field-short_error']/text()"
    ) == ["Boom"]


def _list_rows(response):
    return lxml.html.fromstring(response.content.decode()).xpath("//table[@id='result_list']/tbody/tr")


def test_the_run_list_shows_the_question_and_finds_a_run_by_it(staff_client):
    long_question = "热泵在零下二十度还能用吗？" + "Tell me about defrost cycles and ground loops. " * 5
    wanted = RunFactory(message=MessageFactory(content=long_question))
    RunFactory(message=MessageFactory(content="Solid-state batteries?"))

    response = staff_client.get(reverse("admin:agents_run_changelist"), {"q": "零下二十度"})

    [row] = _list_rows(response)
    shown = row.xpath("string(td[@class='field-question_short'])")
    assert shown.startswith("热泵在零下二十度还能用吗？Tell me about") and shown.endswith("…")
    assert len(shown) == QUESTION_LIST_CHARS
    assert row.xpath("string(.//*[contains(@class, 'field-id')])") == str(wanted.pk)


def test_the_run_list_links_each_run_to_its_trace_not_to_the_conversation_page(staff_client):
    run = RunFactory(message=MessageFactory(conversation=ConversationFactory(title="Heat pumps")))

    [row] = _list_rows(staff_client.get(reverse("admin:agents_run_changelist")))
    links = {a.text_content(): a.get("href") for a in row.xpath("td[@class='field-conversation_link']//a")}

    conversation = run.message.conversation
    assert links == {
        "Heat pumps": reverse("admin:conversations_conversation_change", args=[conversation.pk]),
        "trace": reverse("admin:agents_run_change", args=[run.pk]) + "#trace",
    }
    # Where the link lands: the trace, read by staff who cannot open the conversation itself.
    page = lxml.html.fromstring(staff_client.get(links["trace"]).content)
    assert page.xpath("//section[@id='trace']/h2/text()") == ["Trace"]
    assert conversation.get_absolute_url() not in staff_client.get(reverse("admin:agents_run_changelist")).text


def test_the_run_list_takes_as_many_queries_for_many_runs_as_for_one(staff_client, django_assert_num_queries):
    RunFactory(status=Run.Status.COMPLETED)
    url = reverse("admin:agents_run_changelist")
    staff_client.get(url)  # the session and the user, read once
    with CaptureQueriesContext(connection) as one:
        staff_client.get(url)
    for _ in range(5):
        RunFactory(status=Run.Status.FAILED, error="Boom")

    with django_assert_num_queries(len(one)):
        response = staff_client.get(url)

    assert len(_list_rows(response)) == 6


def test_cancel_selected_runs_cancels_active_ones_and_leaves_ended_ones(staff_client, user):
    queued = RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=user)))
    done = RunFactory(status=Run.Status.COMPLETED, finished_at=timezone.now())
    response = staff_client.post(
        reverse("admin:agents_run_changelist"),
        {"action": "runs_cancel", "_selected_action": [queued.pk, done.pk]},
        follow=True,
    )
    queued.refresh_from_db()
    assert queued.status == Run.Status.CANCELLED and queued.cancel_requested
    assert Run.objects.get(pk=done.pk).status == Run.Status.COMPLETED
    text = _text(response)
    assert f"Cancelled 1 run(s): {queued.pk}" in text and f"Already ended, left as they were: {done.pk}" in text


def _chunked_run(*, ended_days_ago: float | None, status=Run.Status.COMPLETED):
    finished = timezone.now() - timedelta(days=ended_days_ago) if ended_days_ago is not None else None
    message = MessageFactory(response="The whole answer.")
    run = RunFactory(message=message, status=status, finished_at=finished)
    RunEvent.objects.bulk_create(
        [
            RunEvent(run=run, seq=n, type=RunEvent.Type.LLM_CHUNK, agent="lead_agent", data={"content": "tok"})
            for n in range(1, 6)
        ]
        + [
            RunEvent(
                run=run,
                seq=6,
                type=RunEvent.Type.LLM_COMPLETE,
                agent="lead_agent",
                data={"content": "The whole answer."},
            ),
            RunEvent(run=run, seq=7, type=RunEvent.Type.COMPLETE, data={"response": "The whole answer."}),
        ]
    )
    return run


@pytest.mark.events_by_hand
def test_purging_streamed_text_counts_first_then_hands_the_fold_to_a_worker(
    staff_client, django_capture_on_commit_callbacks
):
    from django_q.models import OrmQ

    from agents.tasks import runs_fold

    old = _chunked_run(ended_days_ago=40)
    recent = _chunked_run(ended_days_ago=2)
    active = _chunked_run(ended_days_ago=None, status=Run.Status.RUNNING)
    url = reverse("admin:agents_run_purge_chunks")
    assert "Purge streamed text" in staff_client.get(reverse("admin:agents_run_changelist")).text

    counted = staff_client.post(url, {"older_than_days": 30, "count": "1"})
    assert "Would fold 1 runs." in _text(counted)
    assert RunEvent.objects.filter(type=RunEvent.Type.LLM_CHUNK).count() == 15

    with django_capture_on_commit_callbacks(execute=True):
        applied = staff_client.post(url, {"older_than_days": 30, "apply": "1"}, follow=True)
    assert "The streamed text of 1 runs is being folded in the background." in _text(applied)
    # The request only queued the work.
    assert old.events.filter(type=RunEvent.Type.LLM_CHUNK).count() == 5
    [queued] = OrmQ.objects.all()
    assert (queued.func(), queued.task["args"]) == ("agents.tasks.runs_fold", (30,))

    assert runs_fold(*queued.task["args"]) == 1
    assert list(old.events.values_list("type", flat=True)) == [RunEvent.Type.LLM_COMPLETE, RunEvent.Type.COMPLETE]
    assert Message.objects.get(pk=old.message_id).response == "The whole answer."
    assert recent.events.filter(type=RunEvent.Type.LLM_CHUNK).count() == 5
    assert active.events.filter(type=RunEvent.Type.LLM_CHUNK).count() == 5


def test_purge_needs_a_sensible_number_of_days_and_staff(staff_client, client, user):
    url = reverse("admin:agents_run_purge_chunks")
    assert "Ensure this value is greater than or equal to 0" in _text(
        staff_client.post(url, {"older_than_days": -1, "apply": "1"})
    )
    client.force_login(user)
    assert client.post(url, {"older_than_days": 0, "apply": "1"}).status_code == 302


def test_only_staff_allowed_to_cancel_runs_are_offered_the_action_and_can_use_it(client):
    queued = RunFactory()
    url = reverse("admin:agents_run_changelist")
    selection = {"action": "runs_cancel", "_selected_action": [queued.pk]}

    client.force_login(view_only_staff())
    assert "runs_cancel" not in actions_offered(client.get(url))
    client.post(url, selection)
    queued.refresh_from_db()
    assert (queued.status, queued.cancel_requested) == (Run.Status.QUEUED, False)
    assert not queued.events.exists()

    client.force_login(staff_with("agents.view_run", "agents.cancel_run"))
    assert "runs_cancel" in actions_offered(client.get(url))
    client.post(url, selection)
    queued.refresh_from_db()
    assert queued.status == Run.Status.CANCELLED


@pytest.mark.events_by_hand
def test_only_staff_allowed_to_purge_see_the_purge_and_can_use_it(client):
    old = _chunked_run(ended_days_ago=40)
    changelist, url = reverse("admin:agents_run_changelist"), reverse("admin:agents_run_purge_chunks")

    client.force_login(view_only_staff())
    assert url not in client.get(changelist).text
    assert client.get(url).status_code == 403
    assert client.post(url, {"older_than_days": 0, "count": "1"}).status_code == 403
    assert client.post(url, {"older_than_days": 0, "apply": "1"}).status_code == 403
    assert old.events.filter(type=RunEvent.Type.LLM_CHUNK).count() == 5

    client.force_login(staff_with("agents.view_run", "agents.purge_chunks"))
    assert url in client.get(changelist).text
    assert client.get(url).status_code == 200
    assert "Would fold 1 runs." in _text(client.post(url, {"older_than_days": 30, "count": "1"}))


# Names that are attributes or methods of a dict or of any object: a template
# that looked them up on a dict of model-chosen names would find the wrong thing.
HOSTILE_NAMES = ("items", "keys", "values", "__class__", "get", "update")


def test_tools_named_like_a_dicts_methods_are_rows_of_the_trace_like_any_other(staff_client, user, scripted_model):
    scripted_model.add(*(Text(call(name)) for name in HOSTILE_NAMES), Text(call("items")), Text("Done."))
    conversation = lifecycle.conversation_start(user=user, content="Call them", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)

    response = staff_client.get(reverse("admin:agents_run_change", args=[run.pk]))

    assert response.status_code == 200
    rows = lxml.html.fromstring(response.content).xpath("//h3[.='Tools']/following-sibling::table[1]/tbody/tr")
    tools = {
        row.xpath("td[1]")[0].text_content(): [td.text_content() for td in row.xpath("td[2]|td[3]")] for row in rows
    }
    assert tools == {name: ["2" if name == "items" else "1"] * 2 for name in HOSTILE_NAMES}
    agents = lxml.html.fromstring(response.content).xpath("//h3[.='Agents']/following-sibling::table[1]/tbody/tr")
    assert [row.xpath("td[1]")[0].text_content() for row in agents] == ["lead_agent"]


def test_the_trace_shows_a_compaction_starting_and_one_that_cut_the_context(staff_client, user, small_window):
    run = run_with_a_cut_compaction(user, small_window)

    page = lxml.html.fromstring(staff_client.get(reverse("admin:agents_run_change", args=[run.pk])).content)

    timeline = " ".join(page.xpath("//table[@class='timeline']//text()"))
    assert "summarising the context" in timeline
    assert "context cut, not summarised (The model service answered 400" in timeline


def test_the_trace_names_the_lead_model_the_conversation_chose(staff_client, user, lead_models, scripted_model):
    scripted_model.add(Text("热泵很高效。"))
    conversation = lifecycle.conversation_start(user=user, content="热泵的效率？", lead_model="fast", enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)

    page = staff_client.get(reverse("admin:agents_run_change", args=[run.pk])).content.decode()
    text = " ".join(lxml.html.fromstring(page).text_content().split())

    assert "The lead agent answered with 快速 Fast (fast-model)." in text
    assert "started with model fast-model (快速 Fast)" in text


def test_the_run_list_shows_waiting_runs_and_their_place(staff_client, user, settings):
    settings.TURNS_PER_USER = 1
    runs = [lifecycle.conversation_start(user=user, content=f"Question {n}").active_branch.runs.get() for n in range(3)]

    response = staff_client.get(reverse("admin:agents_run_changelist"), {"status__exact": "waiting_slot"})

    rows = {
        int(row.xpath("string(.//*[contains(@class, 'field-id')])")): " ".join(row.text_content().split())
        for row in lxml.html.fromstring(response.content).xpath("//table[@id='result_list']/tbody/tr")
    }
    assert set(rows) == {runs[1].pk, runs[2].pk}
    assert "next" in rows[runs[1].pk] and "1 ahead" in rows[runs[2].pk]


def test_budgets_are_edited_on_the_user_and_the_user_list_shows_tokens_today(staff_client, user, settings):
    settings.DAILY_TOKEN_BUDGET = 10_000
    TokenSpendFactory(user=user, tokens=1_234)
    listed = _text(staff_client.get(reverse("admin:auth_user_changelist"), {"q": user.username}))
    assert "1,234" in listed and "10,000" in listed

    page = staff_client.get(reverse("admin:auth_user_change", args=[user.pk]))
    form = {
        name: value
        for name, value in lxml.html.fromstring(page.content).get_element_by_id("user_form").form_values()
        if not name.startswith("token_budget-")
    }
    prefix = "token_budget"
    form.update(
        {
            f"{prefix}-TOTAL_FORMS": "1",
            f"{prefix}-INITIAL_FORMS": "0",
            f"{prefix}-0-daily_tokens": "50000",
            f"{prefix}-0-user": str(user.pk),
        }
    )
    response = staff_client.post(reverse("admin:auth_user_change", args=[user.pk]), form)
    assert response.status_code == 302, _text(response)[:2000]
    assert user.token_budget.daily_tokens == 50_000
    assert "50,000" in _text(staff_client.get(reverse("admin:auth_user_changelist"), {"q": user.username}))


# --- HTTP tools -----------------------------------------------------------------------


@pytest.fixture
def ticket_service():
    running = Service().start()
    yield running
    running.stop()


def _http_tool_form(service_url: str, **changes) -> dict:
    schema = {
        "type": "object",
        "properties": {"ticket_id": {"type": "string", "x-in": "path", "examples": ["T-1"]}},
        "required": ["ticket_id"],
    }
    return {
        "name": "ticket_lookup",
        "description": "Looks a ticket up.",
        "method": "GET",
        "url_template": f"{service_url}/api/tickets/{{ticket_id}}",
        "parameters": json.dumps(schema),
        "response_path": "",
        "headers": "{}",
        "timeout": "20",
        "enabled": "on",
        "permission": "auto",
        "agents": ["lead_agent", "search_agent"],
        "secret_header": "Authorization",
        "new_secret": "",
        **changes,
    }


def test_an_http_tools_secret_is_write_only_in_the_admin(staff_client, ticket_service):
    add = reverse("admin:agents_httptool_add")
    response = staff_client.post(add, _http_tool_form(ticket_service.url, new_secret="Bearer tok-8d7f6e5a"))

    assert response.status_code == 302, _text(response)
    # Left out of any error report of the request.
    assert response.wsgi_request.sensitive_post_parameters == ("new_secret",)
    tool = HttpTool.objects.get()
    assert tool.agents == ["lead_agent", "search_agent"] and tool.secret_read() == "Bearer tok-8d7f6e5a"
    assert "tok-8d7f6e5a" not in tool.secret_encrypted
    page = staff_client.get(reverse("admin:agents_httptool_change", args=[tool.pk]))
    assert "tok-8d7f6e5a" not in page.text and "Secret: set" in _text(page).replace("Secret status", "Secret")
    listing = staff_client.get(reverse("admin:agents_httptool_changelist"))
    assert "tok-8d7f6e5a" not in listing.text and "everyone" in _text(listing)

    # Saved again without a new value, the secret is kept; "remove" removes it.
    staff_client.post(reverse("admin:agents_httptool_change", args=[tool.pk]), _http_tool_form(ticket_service.url))
    tool.refresh_from_db()
    assert tool.secret_read() == "Bearer tok-8d7f6e5a"
    staff_client.post(
        reverse("admin:agents_httptool_change", args=[tool.pk]), _http_tool_form(ticket_service.url, clear_secret="on")
    )
    tool.refresh_from_db()
    assert not tool.has_secret


def test_the_admin_refuses_a_url_whose_host_the_model_would_choose(staff_client):
    form = _http_tool_form("http://{host}")

    response = staff_client.post(reverse("admin:agents_httptool_add"), form)

    assert response.status_code == 200 and "The host is fixed" in _text(response)


def test_test_connection_shows_the_status_the_service_answered(staff_client, ticket_service):
    staff_client.post(
        reverse("admin:agents_httptool_add"), _http_tool_form(ticket_service.url, new_secret="tok-abcdef12")
    )
    tool = HttpTool.objects.get()

    response = staff_client.post(reverse("admin:agents_httptool_test", args=[tool.pk]), follow=True)

    shown = [str(message) for message in response.context["messages"]][-1]
    assert f"ticket_lookup: GET {ticket_service.url}/api/tickets/T-1 → HTTP 200 OK, application/json" in shown
    assert ticket_service.received[0].headers["Authorization"] == "tok-abcdef12"
    assert "tok-abcdef12" not in response.content.decode()
    assert staff_client.get(reverse("admin:agents_httptool_test", args=[tool.pk])).status_code == 403


@pytest.fixture
def elsewhere():
    """A second service: the host a staff member might point a tool at."""
    running = Service().start()
    yield running
    running.stop()


def test_staff_who_move_a_tool_to_another_host_must_enter_its_secret_again_and_it_never_goes_there(
    staff_client, client, ticket_service, elsewhere
):
    staff_client.post(
        reverse("admin:agents_httptool_add"), _http_tool_form(ticket_service.url, new_secret="Bearer tok-9e8d7c6b")
    )
    tool = HttpTool.objects.get()
    # Staff who may change HTTP tools, but are no superuser and never saw the secret.
    client.force_login(staff_with("agents.change_httptool"))
    change = reverse("admin:agents_httptool_change", args=[tool.pk])
    test = reverse("admin:agents_httptool_test", args=[tool.pk])

    refused = client.post(change, _http_tool_form(elsewhere.url))

    assert refused.status_code == 200
    assert (
        f"The stored secret was entered for {ticket_service.url} and would now go to {elsewhere.url}: "
        f"enter it again for {elsewhere.url}, or remove it."
    ) in _text(refused)
    tool.refresh_from_db()
    assert tool.url_template.startswith(ticket_service.url) and tool.secret_read() == "Bearer tok-9e8d7c6b"
    client.post(test)
    assert elsewhere.received == [] and ticket_service.received[-1].headers["Authorization"] == "Bearer tok-9e8d7c6b"
    # Another path of the same origin, however the origin is spelt, keeps it.
    same_origin = ticket_service.url.replace("http://", "HTTP://")
    moved_path = client.post(
        change, _http_tool_form(same_origin, url_template=f"{same_origin}/api/v2/tickets/{{ticket_id}}")
    )
    assert moved_path.status_code == 302, _text(moved_path)
    client.post(test)
    assert ticket_service.received[-1].headers["Authorization"] == "Bearer tok-9e8d7c6b"

    # Removing the secret lets the move be saved; Test connection then sends none.
    moved = client.post(change, _http_tool_form(elsewhere.url, clear_secret="on"))
    assert moved.status_code == 302, _text(moved)
    tested = client.post(test, follow=True)
    assert f"GET {elsewhere.url}/api/tickets/T-1 → HTTP 200 OK" in str(list(tested.context["messages"])[-1])
    [received] = elsewhere.received
    assert "Authorization" not in received.headers and "tok-9e8d7c6b" not in repr(received)
    # Entered again by someone who knows it, it goes there.
    client.post(change, _http_tool_form(elsewhere.url, new_secret="Bearer tok-for-elsewhere"))
    client.post(test)
    assert elsewhere.received[-1].headers["Authorization"] == "Bearer tok-for-elsewhere"
    page = client.get(change)
    assert f"set, for {elsewhere.url}" in _text(page) and "tok-for-elsewhere" not in page.text


@pytest.mark.parametrize(
    "moved",
    [
        lambda url: url.replace("http://", "https://"),
        lambda url: url.rsplit(":", 1)[0] + ":1",
        lambda url: url.replace("127.0.0.1", "localhost"),
    ],
    ids=["scheme", "port", "host"],
)
def test_a_secret_whose_tool_was_moved_outside_the_admin_is_sent_nowhere(staff_client, ticket_service, moved):
    staff_client.post(
        reverse("admin:agents_httptool_add"), _http_tool_form(ticket_service.url, new_secret="Bearer tok-9e8d7c6b")
    )
    tool = HttpTool.objects.get()
    target = moved(ticket_service.url)
    HttpTool.objects.filter(pk=tool.pk).update(url_template=f"{target}/api/tickets/{{ticket_id}}")

    tested = staff_client.post(reverse("admin:agents_httptool_test", args=[tool.pk]), follow=True)
    page = staff_client.get(reverse("admin:agents_httptool_change", args=[tool.pk]))

    said = str(list(tested.context["messages"])[-1])
    assert f"its secret was entered for {ticket_service.url} and would now go to" in said
    assert "an administrator must enter it again" in said and ticket_service.received == []
    assert f"set for {ticket_service.url}, where this no longer goes" in _text(page)


@pytest.mark.parametrize("people", [3, 60])
def test_the_user_list_reads_budgets_and_spending_for_the_page_in_the_same_queries(
    staff_client, people, settings, django_assert_max_num_queries
):
    settings.DAILY_TOKEN_BUDGET = 10_000
    users = [UserFactory(username=f"同事{n:03}") for n in range(people)]
    TokenSpendFactory(user=users[-1], tokens=4_321)
    TokenBudget.objects.create(user=users[-1], daily_tokens=20_000)

    # The session, the user, the count twice, the page, its budgets and spending, and the filters' groups.
    with django_assert_max_num_queries(10):
        listed = _text(staff_client.get(reverse("admin:auth_user_changelist"), {"q": "同事"}))

    assert "4,321" in listed and "20,000" in listed and listed.count("10,000") == people - 1
