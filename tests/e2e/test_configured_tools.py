"""A tool an administrator configured, in the browser: an HTTP tool that asks
before each call pauses the turn on an approval prompt naming it, the host
and the whole request it will send, and its parameters; approved, exactly
that request goes to a real service on 127.0.0.1 with the tool's secret
header and the turn goes on with its answer; denied, the model is told so and
the turn goes on without it. The secret shows on no page and in no log line
of the portal."""

import json
import secrets

import pytest
from playwright.sync_api import expect

from tests.agents.tools.http_service import Service
from tests.e2e.conftest import portal_running
from tests.e2e.test_first_turn import ANSWER_SELECTOR, TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text, ToolCalls

pytestmark = pytest.mark.e2e

TOOL = "ticket_lookup"
# The value alone, as it would leak: a page or a log could show it without its header.
TOKEN = f"e2e-s3cr3t-{secrets.token_hex(8)}"
SECRET = f"Bearer {TOKEN}"
PARAMETERS = {
    "type": "object",
    "properties": {
        "ticket_id": {"type": "string", "x-in": "path", "description": "The ticket's id, e.g. T-7"},
        "note": {"type": "string", "x-in": "query", "description": "Why it is looked up"},
    },
    "required": ["ticket_id"],
}
ARGUMENTS = {"ticket_id": "T-42", "note": "客户还在等"}
# The request ARGUMENTS make, past the service's origin, as it is sent.
REQUEST = "/api/tickets/T-42?note=%E5%AE%A2%E6%88%B7%E8%BF%98%E5%9C%A8%E7%AD%89"


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory):
    """A portal of this module's own whose model calls tools natively (function
    calling), with one worker: a turn waiting for approval must leave it free."""
    with portal_running(
        template=portal_template,
        data_dir=tmp_path_factory.mktemp("portal-tools"),
        extra_env={"ARTIFACTFLOW_TOOL_MODE": "native", "ARTIFACTFLOW_WORKERS": "1"},
    ) as running:
        assert running.shell("from django.conf import settings; print(settings.Q_CLUSTER['workers'])").strip() == "1"
        yield running


@pytest.fixture(scope="module")
def service():
    running = Service().start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def group(portal, service):
    """A group whose members' conversations may use the confirm tool, limited
    to it so no other user's turn is offered it; both are removed at the end."""
    name = f"e2e-tools-{secrets.token_hex(4)}"
    portal.shell(
        "import json; from django.contrib.auth.models import Group; from agents.models import HttpTool; "
        f"group = Group.objects.create(name={name!r}); "
        f"tool = HttpTool(name={TOOL!r}, description='Looks a ticket up in the team tracker.', method='GET', "
        f"url_template={service.url + '/api/tickets/{ticket_id}'!r}, parameters=json.loads({json.dumps(PARAMETERS)!r}), "
        "response_path='data', permission='confirm', agents=['lead_agent'], secret_header='Authorization'); "
        f"tool.secret_set({SECRET!r}); tool.full_clean(); tool.save(); tool.groups.add(group)"
    )
    yield name
    portal.shell(
        "from django.contrib.auth.models import Group; from agents.models import HttpTool; "
        f"HttpTool.objects.filter(name={TOOL!r}).delete(); Group.objects.filter(name={name!r}).delete()"
    )


@pytest.fixture
def member(portal, group, service):
    user = portal.user_create(prefix="e2e-tools")
    portal.shell(
        "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Group; "
        f"get_user_model().objects.get(username={user.username!r}).groups.add(Group.objects.get(name={group!r}))"
    )
    service.received.clear()
    return user


def _run_status(portal, run_id: str) -> str:
    return portal.shell(f"from agents.models import Run; print(Run.objects.get(pk={run_id!r}).status)").strip()


def _waiting_for_approval(portal, page):
    """The approval prompt, once the turn is paused on it; the run's id."""
    prompt = page.locator("form.permission")
    expect(prompt).to_contain_text(f"{TOOL} needs your approval", timeout=TURN_TIMEOUT)
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "waiting_permission")
    run_id = turn.get_attribute("data-run")
    # The task ended with the question: the run waits in the database, not in a worker.
    assert _run_status(portal, run_id) == "waiting_permission"
    return prompt, run_id


def test_a_confirm_tool_waits_for_approval_then_calls_the_service_and_its_secret_shows_nowhere(
    portal, model_server, service, member, new_page, screenshot
):
    model_server.add(
        ToolCalls([(TOOL, ARGUMENTS)]),
        Text("Meanwhile: nothing else is open."),
        Text("Ticket T-42 is open and assigned to Wang."),
    )
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=member)

    ask(page, question="What is the state of ticket T-42?")

    prompt, run_id = _waiting_for_approval(portal, page)
    expect(prompt).to_contain_text("lead_agent wants to send a request to")
    # The host first and alone, then the request whole, as it will be sent.
    expect(prompt.locator(".fetch-host")).to_have_text(service.url.removeprefix("http://"))
    expect(prompt.locator(".http-request")).to_have_text(f"GET {service.url}{REQUEST}")
    # Postgres's jsonb keeps the parameters in an order of its own.
    expect(prompt.locator("dl.params dt")).to_have_count(2)
    names = prompt.locator("dl.params dt").all_inner_texts()
    values = prompt.locator("dl.params .param-value").all_inner_texts()
    assert dict(zip(names, values, strict=True)) == ARGUMENTS
    assert service.received == [] and len(model_server.requests) == 1
    offered = {tool["function"]["name"] for tool in model_server.requests[0]["tools"]}
    assert TOOL in offered
    assert TOKEN not in page.content()
    for width, height in ((1366, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            prompt.scroll_into_view_if_needed()
            screenshot(page, name=f"approval-{width}-{scheme}")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.emulate_media(color_scheme="light")
    # The portal's only worker is free: another turn is taken and ends while this one waits.
    meanwhile = new_page(viewport={"width": 1366, "height": 900})
    sign_in(meanwhile, portal=portal, user=member)
    ask(meanwhile, question="Is anything else open?")
    expect(meanwhile.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(meanwhile.locator(ANSWER_SELECTOR)).to_have_text("Meanwhile: nothing else is open.")
    assert _run_status(portal, run_id) == "waiting_permission" and service.received == []

    prompt.get_by_role("button", name="Approve").click()

    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(page.locator(ANSWER_SELECTOR)).to_have_text("Ticket T-42 is open and assigned to Wang.")
    [received] = service.received
    assert received.target == REQUEST and received.query == {"note": ["客户还在等"]}
    assert received.headers["Authorization"] == SECRET
    # The service's answer reached the model as the call's result; the secret never did.
    result = model_server.requests[2]["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == f"call_0_{TOOL}"
    assert '"ticket": "T-42"' in result["content"] and "客户还在等" in result["content"]
    assert TOKEN not in json.dumps(model_server.requests)

    turn.locator(".activity-log summary").click()
    steps = turn.locator(".activity-steps")
    expect(steps).to_contain_text("you approved it")
    expect(steps).to_contain_text('"ticket": "T-42"')
    screenshot(page, name="completed")
    assert TOKEN not in page.content()
    page.reload()
    assert TOKEN not in page.content()
    page.goto(f"{portal.base_url}/runs/{run_id}/activity/")
    expect(page.locator("body")).to_contain_text(TOOL)
    assert TOKEN not in page.content()

    staff = portal.user_create(prefix="e2e-tools-staff")
    portal.shell(
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.filter(username={staff.username!r}).update(is_staff=True, is_superuser=True)"
    )
    admin = new_page(viewport={"width": 1366, "height": 900})
    sign_in(admin, portal=portal, user=staff)
    admin.goto(f"{portal.base_url}/admin/agents/run/{run_id}/change/")
    expect(admin.locator("#content")).to_contain_text(TOOL)
    assert TOKEN not in admin.content()
    admin.goto(f"{portal.base_url}/admin/agents/httptool/")
    admin.get_by_role("link", name=TOOL, exact=True).click()
    expect(admin.locator("#content")).to_contain_text("Authorization")
    assert TOKEN not in admin.content()

    for name, path in portal.logs.items():
        assert TOKEN not in path.read_text(errors="replace"), f"the secret is in the {name} log"


def test_a_denied_call_is_never_made_and_the_turn_goes_on_without_it(portal, model_server, service, member, new_page):
    model_server.add(ToolCalls([(TOOL, ARGUMENTS)]), Text("I was not allowed to look T-42 up."))
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=member)
    ask(page, question="Look ticket T-42 up?")
    prompt, run_id = _waiting_for_approval(portal, page)

    prompt.get_by_role("button", name="Deny").click()

    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(page.locator(ANSWER_SELECTOR)).to_have_text("I was not allowed to look T-42 up.")
    assert service.received == []
    result = model_server.requests[1]["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == f"call_0_{TOOL}"
    assert "The user denied this call." in result["content"] and '"ticket"' not in result["content"]
    turn.locator(".activity-log summary").click()
    expect(turn.locator(".activity-steps")).to_contain_text("you denied it")
    assert _run_status(portal, run_id) == "completed"
