"""MCP servers against a real server written with the `mcp` SDK
(tests/agents/tools/mcp_server.py), over stdio and over streamable HTTP:
discovery, the calls' results (text, image, error, hang), a server that is
down, the secret, the group restriction and the admin's Test connection, in
real turns with the scripted model where it matters."""

import base64
import json
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from agents.models import McpServer, Run, RunEvent
from agents.secrets import url_origin
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.state import pending_request
from agents.tools.base import ToolContext
from agents.tools.mcp import McpError, mcp_server_problems, mcp_tools_build, offered_name, tools_discovered
from artifacts.models import Artifact
from conversations import lifecycle
from tests import waits
from tests.agents.test_engine import call
from tests.agents.tools.http_service import Service
from tests.factories import UserFactory
from tests.model_server import Text

pytestmark = [pytest.mark.django_db, pytest.mark.processes]

ROOT = str(Path(__file__).resolve().parents[3])
KEY = "mcp-key-7f3a9c2e51"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


NAMES = {"demo__echo", "demo__draw_picture", "demo__token", "demo__fail", "demo__hang"}


@pytest.fixture(autouse=True)
def fresh_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "mcp"}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_url():
    """The test server over streamable HTTP, which refuses requests without X-Api-Key: KEY."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.tools.mcp_server", "http", str(port)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ROOT, "MCP_TEST_KEY": KEY},
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + waits.seconds(30)
    while True:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the MCP test server did not start") from None
    yield url
    process.terminate()
    process.wait(10)


def make_server(transport: str, url: str = "", *, name="demo", timeout=None, **fields) -> McpServer:
    # Ten seconds on a quiet machine, more on a busy one: a stdio server is a process to start.
    timeout = timeout or round(waits.seconds(10))
    groups = fields.pop("groups", [])
    fields.setdefault("permission", "auto")
    if transport == "http":
        server = McpServer(name=name, transport="http", url=url, secret_header="X-Api-Key", **fields)
        server.secret_set(KEY)
    else:
        server = McpServer(
            name=name,
            transport="stdio",
            command=fields.pop("command", sys.executable),
            args=fields.pop("args", ["-m", "tests.agents.tools.mcp_server", "stdio"]),
            env={"PYTHONPATH": ROOT},
            **fields,
        )
    server.description = "The test server."
    server.timeout = timeout
    server.full_clean()
    server.save()
    server.groups.set(groups)
    return server


@pytest.fixture(params=["stdio", "http"])
def demo(request):
    url = request.getfixturevalue("http_url") if request.param == "http" else ""
    return make_server(request.param, url)


def _tools(server) -> dict:
    return {tool.name: tool for tool in mcp_tools_build(server)}


def _turn(user, content="Use the demo server"):
    conversation = lifecycle.conversation_start(user=user, content=content, enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _offered(request) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])} | {
        name for name in NAMES if f"## {name}" in request["messages"][0]["content"]
    }


# --- discovery and names ----------------------------------------------------------------


def test_discovery_names_each_tool_server__tool_with_its_description_and_schema(demo):
    served = {s.name: s for s in tools_discovered(demo)}

    assert set(served) == NAMES
    assert served["demo__draw_picture"].tool == "draw.picture"
    assert served["demo__echo"].description == "Says the text back."
    assert served["demo__echo"].schema["properties"]["text"]["type"] == "string"
    assert served["demo__echo"].schema["required"] == ["text"]


def test_a_name_keeps_to_the_models_charset_and_length_and_two_long_ones_stay_two():
    assert offered_name(server="docs", tool="search.files v2") == "docs__search_files_v2"
    long_a = offered_name(server="docs", tool="a" * 80 + "x")
    long_b = offered_name(server="docs", tool="a" * 80 + "y")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b


def test_discovery_is_cached_until_the_server_row_changes(http_url):
    server = make_server("http", http_url)
    tools_discovered(server)
    server.url = "http://127.0.0.1:9/mcp"  # unsaved: the cache still answers for the row as it was
    server.secret_set(KEY)  # entered again for the new origin, as the admin asks

    assert {s.name for s in tools_discovered(server)} == NAMES
    server.save()
    with pytest.raises(Exception, match="could not reach it"):
        tools_discovered(server)


def test_a_server_that_hangs_is_asked_once_then_skipped_until_its_row_changes(tmp_path):
    starts = tmp_path / "starts"
    server = make_server(
        "stdio", command="/bin/sh", args=["-c", f"echo started >> {starts}; exec sleep 30"], name="slow", timeout=1
    )

    with pytest.raises(McpError, match="no answer within its timeout of 1 seconds"):
        tools_discovered(server)
    # The next turns are told at once, without starting it again.
    began = time.monotonic()
    with pytest.raises(McpError, match="no answer within its timeout of 1 seconds"):
        tools_discovered(server)
    assert time.monotonic() - began < 1
    assert starts.read_text().splitlines() == ["started"]

    server.save()
    with pytest.raises(McpError):
        tools_discovered(server)
    assert starts.read_text().splitlines() == ["started", "started"]


def test_a_successful_test_connection_ends_the_wait_after_a_failure(client, http_url):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    server = make_server("http", http_url, name="flaky")
    # The server goes away and comes back; the row (and so its cache key) stays as it was.
    down = "http://127.0.0.1:9/mcp"
    McpServer.objects.filter(pk=server.pk).update(url=down, secret_destination=url_origin(down))
    with pytest.raises(McpError, match="could not reach it"):
        tools_discovered(McpServer.objects.get(pk=server.pk))
    McpServer.objects.filter(pk=server.pk).update(url=http_url, secret_destination=url_origin(http_url))
    with pytest.raises(McpError, match="could not reach it"):
        tools_discovered(McpServer.objects.get(pk=server.pk))

    client.post(reverse("admin:agents_mcpserver_test", args=[server.pk]))

    served = {s.name for s in tools_discovered(McpServer.objects.get(pk=server.pk))}
    assert served == {name.replace("demo__", "flaky__") for name in NAMES}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"transport": "http", "url": "ftp://x/mcp"}, "url"),
        ({"transport": "http", "url": "https://user:pw@x/mcp"}, "url"),
        ({"transport": "stdio", "command": ""}, "command"),
        ({"transport": "stdio", "command": "srv", "args": "--all"}, "args"),
        ({"transport": "stdio", "command": "srv", "env": {"BAD NAME": "1"}}, "env"),
        ({"transport": "stdio", "command": "srv", "env": {"TOKEN": "1"}, "secret_env": "TOKEN"}, "env"),
    ],
)
def test_a_definition_that_cannot_work_is_refused(fields, field):
    assert field in mcp_server_problems(server=McpServer(name="x", agents=["lead_agent"], **fields))


# --- calls ------------------------------------------------------------------------------------


def test_arguments_that_do_not_fit_the_schema_are_an_error_before_any_call(demo):
    result = _tools(demo)["demo__echo"].handler(ToolContext(artifacts=None), times="many")

    assert not result.success and "invalid arguments" in result.content and "text" in result.content


def test_an_error_of_the_tool_is_a_tool_error_the_model_reads(demo):
    result = _tools(demo)["demo__fail"].handler(ToolContext(artifacts=None))

    assert not result.success and "the tool broke on purpose" in result.content


def test_a_hanging_tool_times_out_at_the_servers_timeout(demo):
    tools = _tools(demo)
    demo.timeout = 2
    started = time.monotonic()

    result = tools["demo__hang"].handler(ToolContext(artifacts=None))

    assert not result.success and "no answer within its timeout of 2 seconds" in result.content
    assert time.monotonic() - started < 2 + 6


# --- real turns ---------------------------------------------------------------------------------


def test_a_turn_calls_the_tools_text_image_and_error_through_the_engines_path(user, scripted_model, demo, client):
    scripted_model.add(
        Text(call("demo__echo", text="你好", times="2")),
        Text(call("demo__draw_picture")),
        Text(call("demo__fail")),
        Text("Done."),
    )

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Done."
    assert NAMES <= _offered(scripted_model.requests[0])
    echoed = scripted_model.requests[1]["messages"][-1]["content"]
    assert echoed.startswith('<tool_result tool="demo__echo">') and "echo: 你好 echo: 你好" in echoed
    completes = list(run.events.filter(type=RunEvent.Type.TOOL_COMPLETE).order_by("seq"))
    assert [(e.data["tool"], e.data["success"]) for e in completes] == [
        ("demo__echo", True),
        ("demo__draw_picture", True),
        ("demo__fail", False),
    ]
    assert "echo: 你好" in completes[0].data["result"]
    picture = Artifact.objects.get(session__conversation=run.message.conversation)
    assert picture.content_type == "image/png" and picture.file.read().startswith(b"\x89PNG")
    assert picture.source == Artifact.Source.AGENT
    assert f"kept as the file artifact {picture.artifact_id}" in completes[1].data["result"]
    assert "the tool broke on purpose" in scripted_model.requests[3]["messages"][-1]["content"]
    client.force_login(user)
    activity = client.get(reverse("run-activity", args=[run.pk]))
    assert "demo__echo" in activity.text and "demo__fail" in activity.text


def test_a_hanging_tool_times_out_and_the_turn_goes_on(user, scripted_model, http_url):
    make_server("http", http_url, timeout=2)
    scripted_model.add(Text(call("demo__hang")), Text("It did not answer."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "It did not answer."
    complete = run.events.get(type=RunEvent.Type.TOOL_COMPLETE)
    assert not complete.data["success"] and "timeout of 2 seconds" in complete.data["result"]


@pytest.mark.parametrize(
    "down",
    [
        {"transport": "http", "url": "http://127.0.0.1:9/mcp"},
        {"transport": "stdio", "command": "/bin/false", "args": []},
    ],
    ids=["closed-port", "command-exits"],
)
def test_a_server_that_is_down_is_a_line_in_activity_and_the_turn_goes_on(user, scripted_model, client, down):
    transport = down.pop("transport")
    make_server(transport, down.pop("url", ""), name="gone", timeout=5, **down)
    scripted_model.add(Text("Answered without it."))

    run = _turn(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Answered without it."
    assert not any(name.startswith("gone__") for name in _offered(scripted_model.requests[0]))
    notice = run.events.get(type=RunEvent.Type.TOOL_COMPLETE)
    assert notice.data["tool"] == "gone" and not notice.data["success"]
    assert "gone is unavailable, so its tools are not offered in this turn" in notice.data["output"]["message"]
    client.force_login(user)
    activity = client.get(reverse("run-activity", args=[run.pk]))
    assert "gone is unavailable" in activity.text


def test_the_secret_header_reaches_the_server_and_shows_nowhere(user, scripted_model, http_url, client, caplog):
    caplog.set_level(logging.DEBUG)
    server = make_server("http", http_url)
    scripted_model.add(Text(call("demo__echo", text="hi")), Text("Fine."))

    run = _turn(user)

    # The server refuses every request without the key: the tool answering is the key arriving.
    assert run.events.get(type=RunEvent.Type.TOOL_COMPLETE).data["success"]
    assert not any(KEY in json.dumps(event.data) for event in RunEvent.objects.all())
    assert KEY not in caplog.text
    client.force_login(user)
    for page in (
        client.get(reverse("conversation-detail", args=[run.message.conversation_id])),
        client.get(reverse("run-activity", args=[run.pk])),
    ):
        assert page.status_code == 200 and KEY not in page.text
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    trace = client.get(reverse("admin:agents_run_change", args=[run.pk]))
    assert "demo__echo" in trace.text and KEY not in trace.text
    admin_page = client.get(reverse("admin:agents_mcpserver_change", args=[server.pk]))
    assert admin_page.status_code == 200 and KEY not in admin_page.text


def test_over_stdio_the_secret_is_passed_in_its_variable_and_wiped_from_the_result(user, scripted_model):
    server = make_server("stdio", secret_env="MCP_TEST_TOKEN")
    server.secret_set(KEY)
    server.save()
    scripted_model.add(Text(call("demo__token")), Text("Fine."))

    run = _turn(user)

    complete = run.events.get(type=RunEvent.Type.TOOL_COMPLETE)
    assert complete.data["success"] and "my token is [secret]" in complete.data["result"]
    assert KEY not in json.dumps(scripted_model.requests) and KEY not in json.dumps(complete.data)


@pytest.mark.parametrize(("spelt", "echoed"), [("json", KEY.replace("-", "\\u002d")), ("basic", _b64(f"svc:{KEY}"))])
def test_a_result_holding_the_secret_encoded_has_it_wiped_too(spelt, echoed):
    server = make_server("stdio", secret_env="MCP_TEST_TOKEN")
    server.secret_set(KEY)
    server.save()

    result = _tools(server)["demo__token"].handler(ToolContext(artifacts=None), spelt=spelt)

    assert result.success and "my token is [secret]" in result.content, result.content
    assert echoed not in result.content


def test_a_confirm_server_pauses_the_turn_until_the_user_approves(user, scripted_model, http_url):
    make_server("http", http_url, permission="confirm")
    scripted_model.add(Text(call("demo__echo", text="ok")), Text("Echoed."))

    run = _turn(user)

    assert run.status == Run.Status.WAITING_PERMISSION
    request = run.events.get(type=RunEvent.Type.PERMISSION_REQUEST)
    assert request.data["tool"] == "demo__echo" and request.data["params"] == {"text": "ok"}
    pending = pending_request(run.checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.message.response == "Echoed."
    assert "echo: ok" in run.events.get(type=RunEvent.Type.TOOL_COMPLETE).data["result"]


def test_a_wrong_secret_is_refused_by_the_server_and_said_in_activity(user, scripted_model, http_url, caplog):
    caplog.set_level(logging.WARNING)
    server = make_server("http", http_url)
    server.secret_set("not-the-key")
    server.save()
    scripted_model.add(Text("Without it."))

    run = _turn(user)

    notice = run.events.get(type=RunEvent.Type.TOOL_COMPLETE)
    assert run.status == Run.Status.COMPLETED and "HTTP 401" in notice.data["output"]["message"]
    assert "not-the-key" not in json.dumps(notice.data)
    assert "MCP server demo is unavailable: the server answered HTTP 401" in caplog.text
    assert "not-the-key" not in caplog.text


def test_a_server_limited_to_a_group_never_reaches_another_users_model(user, other_user, scripted_model, http_url):
    team = Group.objects.create(name="team")
    user.groups.add(team)
    make_server("http", http_url, groups=[team])
    scripted_model.add(Text("Mine."), Text("Theirs."))

    _turn(user)
    _turn(other_user)

    mine, theirs = scripted_model.requests
    assert NAMES <= _offered(mine)
    assert "demo__" not in json.dumps(theirs)


# --- the admin -------------------------------------------------------------------------------------


def test_test_connection_lists_the_tools_or_says_what_failed(client, http_url):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    server = make_server("http", http_url)
    down = make_server("http", "http://127.0.0.1:9/mcp", name="gone")

    shown = client.post(reverse("admin:agents_mcpserver_test", args=[server.pk]), follow=True)
    failed = client.post(reverse("admin:agents_mcpserver_test", args=[down.pk]), follow=True)

    [message] = [str(m) for m in shown.context["messages"]]
    assert message.startswith("demo → ") and "demo__echo: Says the text back." in message
    assert "demo__draw_picture: Draws a tiny picture." in message and KEY not in shown.text
    [error] = [str(m) for m in failed.context["messages"]]
    assert error.startswith("gone → could not reach it")


def test_only_superusers_see_or_configure_mcp_servers(client, http_url):
    server = make_server("http", http_url)
    staff = UserFactory(is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.set(Permission.objects.filter(codename__endswith="mcpserver"))
    client.force_login(staff)

    assert client.get(reverse("admin:agents_mcpserver_changelist")).status_code == 403
    assert client.get(reverse("admin:agents_mcpserver_change", args=[server.pk])).status_code in (302, 403)
    assert client.post(reverse("admin:agents_mcpserver_test", args=[server.pk])).status_code == 403


def test_an_http_servers_secret_goes_to_no_other_origin_than_it_was_entered_for(client, http_url):
    server = make_server("http", http_url)
    elsewhere = Service().start()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    change = reverse("admin:agents_mcpserver_change", args=[server.pk])
    form = {
        "name": "demo",
        "description": "The test server.",
        "transport": "http",
        "timeout": "10",
        "url": f"{elsewhere.url}/mcp",
        "args": "[]",
        "env": "{}",
        "enabled": "on",
        "permission": "auto",
        "agents": ["lead_agent"],
        "secret_header": "X-Api-Key",
    }
    try:
        refused = client.post(change, form)
        McpServer.objects.filter(pk=server.pk).update(url=f"{elsewhere.url}/mcp")
        tested = client.post(reverse("admin:agents_mcpserver_test", args=[server.pk]), follow=True)
    finally:
        elsewhere.stop()

    assert refused.status_code == 200
    assert f"would now go to {elsewhere.url}:" in refused.text.replace("&#x27;", "'")
    [said] = [str(m) for m in tested.context["messages"]]
    assert f"its secret was entered for {http_url.rsplit('/', 1)[0]} and would now go to {elsewhere.url}" in said
    assert elsewhere.received == []
