"""Configured tools in real turns: the scripted model is offered exactly the
HTTP tools its agent and its conversation's owner may use, a call goes to the
service (after the user's approval when the tool asks for it), and the secret
header never shows in an event, a page or the trace."""

import json
import logging

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agents.models import HttpTool, Run, RunEvent
from agents.secrets import SCRUBBED
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.state import pending_request
from artifacts.models import Artifact
from conversations import lifecycle
from tests.agents.test_engine import call
from tests.agents.tools.http_service import Service
from tests.agents.tools.test_http import BASIC, SECRET, SLASHED, leaked, make_tool
from tests.factories import UserFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db


@pytest.fixture
def service():
    running = Service().start()
    yield running
    running.stop()


def _turn(user, content="Look ticket T-7 up"):
    conversation = lifecycle.conversation_start(user=user, content=content, enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _offered(request) -> tuple[str, set[str]]:
    """The system prompt of a model request, and the names of its native tools."""
    return request["messages"][0]["content"], {t["function"]["name"] for t in request.get("tools", [])}


def test_the_lead_calls_an_http_tool_and_its_secret_shows_nowhere(user, scripted_model, service, client):
    make_tool(service.url, permission="auto", response_path="data")
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-7", limit="3")), Text("T-7 is open."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "T-7 is open."
    [received] = service.received
    assert received.path == "/api/tickets/T-7" and received.headers["Authorization"] == SECRET
    prompt = scripted_model.requests[0]["messages"][0]["content"]
    assert "## ticket_lookup" in prompt and "Looks a ticket up in the tracker." in prompt and "x-in" not in prompt
    result = scripted_model.requests[1]["messages"][-1]["content"]
    assert result.startswith('<tool_result tool="ticket_lookup">') and '"ticket": "T-7"' in result
    complete = run.events.get(type=RunEvent.Type.TOOL_COMPLETE)
    assert complete.data["success"] and complete.data["status"] == 200
    token = SECRET.split()[1]
    assert not any(token in json.dumps(event.data) for event in RunEvent.objects.all())
    client.force_login(user)
    page = client.get(reverse("conversation-detail", args=[run.message.conversation_id]))
    assert page.status_code == 200 and "T-7 is open." in page.text and token not in page.text
    activity = client.get(reverse("run-activity", args=[run.pk]))
    assert activity.status_code == 200 and "ticket_lookup" in activity.text and token not in activity.text
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    trace = client.get(reverse("admin:agents_run_change", args=[run.pk]))
    assert "ticket_lookup" in trace.text and token not in trace.text
    tool_page = client.get(reverse("admin:agents_httptool_change", args=[HttpTool.objects.get().pk]))
    assert tool_page.status_code == 200 and token not in tool_page.text


def _strings(value):
    """Every string in a JSON-like value, keys too, as stored (not JSON-escaped again)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize(
    ("secret", "form"),
    [
        (SLASHED, "json_slash"),
        (SLASHED, "base64_user"),
        (SLASHED, "html"),
        (SLASHED, "late"),
        (BASIC, "basic_password_json"),
    ],
)
def test_an_error_answer_echoing_the_secret_leaves_it_in_no_context_event_checkpoint_or_log(
    user, scripted_model, service, caplog, secret, form
):
    caplog.set_level(logging.DEBUG)
    parameters = {"type": "object", "properties": {}}
    make_tool(service.url, path=f"/echo401/{form}", parameters=parameters, permission="auto", secret=secret)
    scripted_model.add(Text(call("ticket_lookup")), Text("The tracker refused the portal's token."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and service.received[0].headers["Authorization"] == secret
    told = scripted_model.requests[1]["messages"][-1]["content"]
    assert "HTTP 401 Unauthorized" in told and SCRUBBED in told
    stored = {
        "the model's context": list(_strings(scripted_model.requests)),
        "the run's events": list(_strings([event.data for event in RunEvent.objects.filter(run=run)])),
        "the checkpoint": list(_strings(run.checkpoint)),
        "the run's error and metrics": [run.error, *_strings(run.metrics)],
        "the log": [caplog.text],
    }
    assert {where: leaked("\n".join(texts), secret) for where, texts in stored.items()} == {
        where: [] for where in stored
    }


def test_a_long_answer_is_spilled_to_an_artifact_like_a_built_in_tools(user, scripted_model, service, settings):
    settings.TOOL_RESULT_MAX_CHARS = 100
    make_tool(service.url, permission="auto")
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-8", comment="x" * 300)), Text("Stored."))

    run = _turn(user)

    stored = run.events.get(type=RunEvent.Type.TOOL_COMPLETE).data["stored_as"]
    assert stored == "ticket_lookup_result_1"
    assert "x" * 300 in Artifact.objects.get(artifact_id=stored).content
    assert "<stored_result" in scripted_model.requests[1]["messages"][-1]["content"]


def test_a_file_the_service_answers_is_kept_as_a_file_artifact_the_model_is_told_of(user, scripted_model, service):
    make_tool(service.url, path="/chart.png", permission="auto", parameters={"type": "object", "properties": {}})
    scripted_model.add(Text(call("ticket_lookup")), Text("Here is the chart."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED
    chart = Artifact.objects.get(session__conversation=run.message.conversation)
    assert chart.content_type == "image/png" and chart.file.read().startswith(b"\x89PNG")
    assert chart.source == Artifact.Source.AGENT and chart.artifact_id.startswith("ticket_lookup_answer")
    result = scripted_model.requests[1]["messages"][-1]["content"]
    assert f"kept as the file artifact {chart.artifact_id}" in result


def test_invalid_arguments_are_an_error_the_model_sees_and_the_turn_goes_on(user, scripted_model, service):
    make_tool(service.url, permission="auto")
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-1", limit="999")), Text("Could not."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and service.received == []
    assert "invalid arguments (limit)" in scripted_model.requests[1]["messages"][-1]["content"]
    assert run.events.get(type=RunEvent.Type.TOOL_COMPLETE).data["success"] is False


def test_a_down_service_is_an_error_and_the_turn_goes_on(user, scripted_model, service):
    make_tool(service.url, permission="auto")
    service.stop()
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-1")), Text("The tracker is down."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "The tracker is down."
    assert "could not reach" in scripted_model.requests[1]["messages"][-1]["content"]
    service.start()  # for the fixture's stop


def test_a_tool_limited_to_a_group_never_reaches_another_users_model(user, scripted_model, service, settings):
    settings.ARTIFACTFLOW_LLM = {**settings.ARTIFACTFLOW_LLM, "tool_mode": "native"}
    finance = Group.objects.create(name="finance")
    member = UserFactory()
    member.groups.add(finance)
    make_tool(service.url, name="ledger_lookup").groups.add(finance)
    make_tool(service.url, name="ticket_lookup")
    scripted_model.add(Text("Outsider's answer."), Text("Member's answer."))

    _turn(user)
    _turn(member)

    outsider, insider = (_offered(request) for request in scripted_model.requests)
    assert "ticket_lookup" in outsider[1] and "ledger_lookup" not in outsider[1]
    assert "ledger_lookup" not in outsider[0]
    assert {"ticket_lookup", "ledger_lookup"} <= insider[1]
    native = next(t for t in scripted_model.requests[1]["tools"] if t["function"]["name"] == "ledger_lookup")
    assert "x-in" not in json.dumps(native)


def test_a_tool_limited_to_a_group_is_absent_from_the_written_tool_list_too(user, scripted_model, service):
    finance = Group.objects.create(name="finance")
    make_tool(service.url, name="ledger_lookup").groups.add(finance)
    scripted_model.add(Text("Answer."))

    _turn(user)

    assert "ledger_lookup" not in scripted_model.requests[0]["messages"][0]["content"]


def test_a_disabled_tool_is_offered_to_nobody(user, scripted_model, service):
    make_tool(service.url, enabled=False)
    scripted_model.add(Text("Answer."))

    _turn(user)

    assert "ticket_lookup" not in scripted_model.requests[0]["messages"][0]["content"]


def test_a_tool_is_offered_only_to_the_agents_it_names(user, scripted_model, service):
    make_tool(service.url, agents=["search_agent"], permission="auto")
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="Look ticket T-3 up")),
        Text(call("ticket_lookup", ticket_id="T-3")),
        Text("T-3 is closed."),
        Text("The search agent says T-3 is closed."),
    )

    run = _turn(user)

    lead, search = (scripted_model.requests[i]["messages"][0]["content"] for i in (0, 1))
    assert "ticket_lookup" not in lead and "## ticket_lookup" in search
    assert run.status == Run.Status.COMPLETED and [r.path for r in service.received] == ["/api/tickets/T-3"]


def test_a_call_the_lead_may_not_make_is_an_unknown_tool(user, scripted_model, service):
    make_tool(service.url, agents=["crawl_agent"], permission="auto")
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-3")), Text("I could not."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and service.received == []
    assert "There is no tool 'ticket_lookup'" in scripted_model.requests[1]["messages"][-1]["content"]


def test_a_confirm_tool_pauses_the_turn_until_the_user_approves(user, scripted_model, service):
    make_tool(service.url, permission="confirm")
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-9")), Text("T-9 is open."))

    run = _turn(user)

    assert run.status == Run.Status.WAITING_PERMISSION and service.received == []
    request = run.events.get(type=RunEvent.Type.PERMISSION_REQUEST)
    assert request.data["tool"] == "ticket_lookup" and request.data["params"] == {"ticket_id": "T-9"}
    pending = pending_request(run.checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.message.response == "T-9 is open."
    assert [r.path for r in service.received] == ["/api/tickets/T-9"]


def test_a_tool_disabled_while_its_call_waited_for_approval_is_not_called(user, scripted_model, service):
    tool = make_tool(service.url, permission="confirm")
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-9")), Text("It is gone."))
    run = _turn(user)
    HttpTool.objects.filter(pk=tool.pk).update(enabled=False)

    pending = pending_request(run.checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and service.received == []
    assert "no longer available" in scripted_model.requests[1]["messages"][-1]["content"]


def test_a_tool_changed_while_its_call_waited_for_approval_is_not_called(user, scripted_model, service):
    tool = make_tool(service.url, permission="confirm")
    scripted_model.add(Text(call("ticket_lookup", ticket_id="T-9")), Text("It changed."))
    run = _turn(user)
    asked = run.events.get(type=RunEvent.Type.PERMISSION_REQUEST).data["request"]
    # Another path of the same service: the secret stays, but the person approved the other one.
    HttpTool.objects.filter(pk=tool.pk).update(url_template=f"{service.url}/api/admin/{{ticket_id}}")

    pending = pending_request(run.checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert asked == {"method": "POST", "url": f"{service.url}/api/tickets/T-9"}
    assert run.status == Run.Status.COMPLETED and service.received == []
    told = scripted_model.requests[1]["messages"][-1]["content"]
    assert "was changed while the call waited for approval" in told and "it was not called" in told
