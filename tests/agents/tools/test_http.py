"""HTTP tools against a real service on 127.0.0.1 (tests.agents.tools.http_service)."""

import base64
import json
import logging
import socket

import pytest

from agents.models import HttpTool
from agents.secrets import SCRUBBED
from agents.tools.base import ToolContext
from agents.tools.http import (
    MAX_BYTES,
    http_tool_build,
    http_tool_problems,
    http_tool_test,
    model_parameters,
)
from tests.agents.tools.http_service import ECHOES, Service
from tests.bounded import finishes_within

pytestmark = pytest.mark.django_db

SECRET = "Bearer s3cr3t-token-4f9a2c"
# Secrets whose characters every encoding changes: "/", "+", "=".
SLASHED = "Bearer abc/def+ghi=jkl/MNO+pqr=="
BASIC = "Basic " + base64.b64encode(b"api-user:pa/ss+wo=rd-9f8e").decode()
TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "ticket_id": {"type": "string", "x-in": "path", "description": "The ticket's id", "examples": ["T-1"]},
        "limit": {"type": "integer", "x-in": "query", "minimum": 1, "maximum": 50},
        "tags": {"type": "array", "items": {"type": "string"}, "x-in": "query"},
        "comment": {"type": "string", "x-in": "body"},
        "urgent": {"type": "boolean", "x-in": "body"},
    },
    "required": ["ticket_id"],
}


@pytest.fixture
def service():
    running = Service().start()
    yield running
    running.stop()


def make_tool(service_url: str, *, path="/api/tickets/{ticket_id}", secret=SECRET, **fields) -> HttpTool:
    tool = HttpTool(
        name=fields.pop("name", "ticket_lookup"),
        description="Looks a ticket up in the tracker.",
        method=fields.pop("method", "POST"),
        url_template=service_url + path,
        headers={"Accept": "application/json"},
        parameters=fields.pop("parameters", TICKET_SCHEMA),
        secret_header="Authorization",
        **fields,
    )
    tool.secret_set(secret)
    tool.full_clean()
    tool.save()
    return tool


def call(tool: HttpTool, **params):
    return http_tool_build(tool).handler(ToolContext(artifacts=None), **params)


def test_each_parameter_goes_where_its_schema_puts_it_and_the_extraction_picks_the_answer(service):
    tool = make_tool(service.url, response_path="data")

    result = call(tool, ticket_id="T-7", limit=5, tags=["db", "urgent"], comment="还在等", urgent=True)

    assert result.success, result.content
    [received] = service.received
    assert (received.method, received.path) == ("POST", "/api/tickets/T-7")
    assert received.query == {"limit": ["5"], "tags": ["db", "urgent"]}
    assert json.loads(received.body) == {"comment": "还在等", "urgent": True}
    assert received.headers["Authorization"] == SECRET and received.headers["Accept"] == "application/json"
    assert result.content.startswith('<http_result tool="ticket_lookup" status="200" content_type="application/json">')
    assert '"ticket": "T-7"' in result.content and "还在等" in result.content and '"data"' not in result.content
    assert result.metadata["status"] == 200


def test_a_json_pointer_extracts_too_and_a_missing_part_is_an_error(service):
    found = call(make_tool(service.url, response_path="/data/body/comment"), ticket_id="T-1", comment="hi")
    missing = call(make_tool(service.url, name="other", response_path="data.nothing"), ticket_id="T-1")

    assert found.success and ">hi</http_result>" in found.content
    assert not missing.success and "nothing at data.nothing" in missing.content


def test_a_path_value_stays_in_its_segment(service):
    call(make_tool(service.url), ticket_id="T-1/admin?drop=1#x")

    [received] = service.received
    assert received.path == "/api/tickets/T-1%2Fadmin%3Fdrop%3D1%23x" and received.query == {}


ITEM_SCHEMA = {
    "type": "object",
    "properties": {"item_id": {"type": "string", "x-in": "path"}},
    "required": ["item_id"],
}


@pytest.mark.parametrize(
    "value",
    [
        ".",
        "..",
        "...",
        "%2e",
        "%2E%2e",
        ".%2e",
        "%252e%252e",
        "%c0%ae%c0%ae",
        "．．",
        "\u2024\u2024",
        "\u2025",
        "\ufe52\ufe52",
        "。。",
        ".\u200b.",
        "..;",
        "..;x=1",
        "..%3Bx",
        "..?x",
        "..#x",
        "..\x00x",
        ". .",
        " .. ",
        "\t..\n",
        "",
        "   ",
        "/",
        "\\",
        "../admin",
        "..\\admin",
        "a/../../admin",
        "a/./b",
        "a//b",
        "..%2Fadmin",
        "%2e%2e%2fadmin",
        "．．／admin",
        "..\u2215admin",
    ],
)
def test_a_path_value_that_some_server_could_read_as_another_path_is_refused_and_nothing_sent(service, value):
    tool = make_tool(service.url, path="/api/v1/items/{item_id}/detail", parameters=ITEM_SCHEMA, method="GET")

    result = call(tool, item_id=value)

    assert not result.success and "would not stay one segment" in result.content, result.content
    assert service.received == []


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ("T-7", "T-7"),
        ("v1.2", "v1.2"),
        ("..a", "..a"),
        ("a..", "a.."),
        (".hidden", ".hidden"),
        ("工单.7", "%E5%B7%A5%E5%8D%95.7"),
        ("group/project", "group%2Fproject"),
        ("%41", "%2541"),
        ("100%", "100%25"),
        ("a;b", "a%3Bb"),
    ],
)
def test_any_other_path_value_reaches_the_service_as_one_segment(service, value, sent):
    tool = make_tool(service.url, path="/api/v1/items/{item_id}/detail", parameters=ITEM_SCHEMA, method="GET")

    result = call(tool, item_id=value)

    assert result.success, result.content
    [received] = service.received
    assert received.path == f"/api/v1/items/{sent}/detail"


def test_test_connection_refuses_an_example_path_value_of_dots_and_sends_nothing(service):
    schema = {**ITEM_SCHEMA, "properties": {"item_id": {**ITEM_SCHEMA["properties"]["item_id"], "examples": [".."]}}}
    tool = make_tool(service.url, path="/api/v1/items/{item_id}/detail", parameters=schema, method="GET")

    report = http_tool_test(tool=tool)

    assert not report.ok and "would not stay one segment" in report.outcome
    assert report.request == f"GET {service.url}/api/v1/items/{{item_id}}/detail"
    assert service.received == []


def test_query_parameters_are_added_to_the_query_the_administrator_fixed(service):
    schema = {"type": "object", "properties": {"q": {"type": "string", "x-in": "query"}}}

    result = call(make_tool(service.url, path="/search?v=2", parameters=schema, method="GET"), q="热泵 效率")

    assert result.success and service.received[0].target == "/search?v=2&q=%E7%83%AD%E6%B3%B5+%E6%95%88%E7%8E%87"


def test_arguments_written_as_text_are_typed_by_the_schema(service):
    # The XML fallback gives every value as text.
    result = call(make_tool(service.url), ticket_id="T-2", limit="7", urgent="false", tags='["a"]')

    assert result.success
    assert service.received[0].query == {"limit": ["7"], "tags": ["a"]}
    assert json.loads(service.received[0].body) == {"urgent": False}


def test_arguments_that_do_not_fit_the_schema_are_an_error_and_no_request(service):
    result = call(make_tool(service.url), ticket_id="T-2", limit=500)

    assert not result.success and "invalid arguments (limit)" in result.content and "500" in result.content
    assert result.output["kind"] == "error"
    assert service.received == []


def test_the_model_never_sees_where_parameters_go():
    shown = model_parameters(TICKET_SCHEMA)

    assert all("x-in" not in spec for spec in shown["properties"].values())
    assert shown["properties"]["ticket_id"]["description"] == "The ticket's id"
    assert TICKET_SCHEMA["properties"]["ticket_id"]["x-in"] == "path"


@pytest.mark.parametrize(
    ("template", "field", "problem"),
    [
        ("http://{host}/api/tickets/{ticket_id}", "url_template", "host is fixed"),
        ("http://api.internal:{port}/api/tickets/{ticket_id}", "url_template", "host is fixed"),
        ("ftp://api.internal/api/tickets/{ticket_id}", "url_template", "http"),
        ("http://user:pw@api.internal/api/tickets/{ticket_id}", "url_template", "user name"),
        ("http://api.internal/api/tickets/{ticket_id}?q={limit}", "url_template", "only in the path"),
        ("http://api.internal/api/tickets", "parameters", "has no {ticket_id}"),
        ("http://api.internal/api/{ticket_id}/{other}", "parameters", "{other}"),
    ],
)
def test_a_definition_that_would_let_the_model_choose_the_host_or_is_incoherent_is_refused(template, field, problem):
    tool = HttpTool(name="t", description="d", url_template=template, parameters=TICKET_SCHEMA)

    assert problem in http_tool_problems(tool=tool)[field]


def test_every_property_says_where_it_goes_and_path_parameters_are_required():
    no_place = {"type": "object", "properties": {"q": {"type": "string"}}}
    optional_path = {"type": "object", "properties": {"id": {"type": "string", "x-in": "path"}}}
    not_a_schema = {"type": "object", "properties": {"q": {"type": 5, "x-in": "query"}}}

    def problems(template, schema):
        return http_tool_problems(tool=HttpTool(name="t", description="d", url_template=template, parameters=schema))

    assert "x-in" in problems("http://a.internal/", no_place)["parameters"]
    assert "must be required" in problems("http://a.internal/{id}", optional_path)["parameters"]
    assert "Not a valid JSON Schema" in problems("http://a.internal/", not_a_schema)["parameters"]


def test_a_tool_named_like_a_built_in_one_is_refused():
    tool = HttpTool(
        name="web_fetch",
        description="d",
        url_template="http://a.internal/",
        parameters={"type": "object", "properties": {}},
    )

    assert "built-in" in http_tool_problems(tool=tool)["name"]


def test_a_timeout_is_a_tool_error_within_the_tools_timeout(service):
    tool = make_tool(service.url, path="/slow", parameters={"type": "object", "properties": {}}, timeout=1)

    with finishes_within(4):
        result = call(tool)

    assert not result.success and "no answer within its timeout of 1 seconds" in result.content


def test_an_error_status_is_a_tool_error_with_the_start_of_the_body(service):
    result = call(make_tool(service.url, path="/fail", parameters={"type": "object", "properties": {}}))

    assert not result.success
    assert "HTTP 500 Internal Server Error: the database is down" in result.content


def test_a_service_that_is_down_is_a_tool_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tool = make_tool(f"http://127.0.0.1:{port}", path="/x", parameters={"type": "object", "properties": {}})

    result = call(tool)

    assert not result.success and f"could not reach http://127.0.0.1:{port}" in result.content


def test_a_redirect_is_not_followed(service):
    result = call(make_tool(service.url, path="/moved", parameters={"type": "object", "properties": {}}))

    assert not result.success and "redirect to http://elsewhere.invalid/steal" in result.content
    assert [r.path for r in service.received] == ["/moved"]


def test_the_secret_reaches_the_service_but_never_what_the_call_reports_or_logs(service, caplog):
    caplog.set_level(logging.DEBUG)
    tool = make_tool(service.url, path="/echo", parameters={"type": "object", "properties": {}})

    result = call(tool)

    assert service.received[0].headers["Authorization"] == SECRET
    # The service's error page repeated the headers: the token is wiped from it.
    assert not result.success and "Authorization" in result.content and SCRUBBED in result.content
    assert "s3cr3t-token-4f9a2c" not in result.content and "s3cr3t" not in json.dumps(result.output)
    assert "s3cr3t" not in caplog.text
    assert "s3cr3t" not in HttpTool.objects.get(pk=tool.pk).secret_encrypted


def test_a_binary_answer_is_described_not_read_as_text(service):
    result = call(make_tool(service.url, path="/chart.png", parameters={"type": "object", "properties": {}}))

    assert result.success and "a file of type image/png, 72 bytes" in result.content


def test_a_huge_answer_is_cut(service):
    result = call(make_tool(service.url, path="/big", parameters={"type": "object", "properties": {}}))

    assert result.success and result.metadata["bytes"] == MAX_BYTES
    assert "cut at 2,097,152 bytes" in result.notes[0]


def test_a_secret_stored_under_another_key_is_a_clear_tool_error(service, settings):
    tool = make_tool(service.url)
    settings.SECRET_KEY = "another key altogether, and long enough to be taken for a real one"

    result = call(tool, ticket_id="T-1")

    assert not result.success and "cannot be decrypted" in result.content and "enter it again" in result.content
    assert service.received == []


def test_test_connection_gets_the_url_with_the_example_values(service):
    tool = make_tool(service.url, method="GET")

    report = http_tool_test(tool=tool)

    assert report.ok and report.request == f"GET {service.url}/api/tickets/T-1"
    assert report.outcome.startswith("HTTP 200 OK, application/json")
    assert service.received[0].headers["Authorization"] == SECRET


def test_test_connection_of_a_post_only_asks_the_host(service):
    report = http_tool_test(tool=make_tool(service.url))

    assert report.ok and report.request == f"HEAD {service.url}/"
    assert [(r.method, r.path) for r in service.received] == [("HEAD", "/")]


def test_test_connection_says_when_the_service_is_down():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    report = http_tool_test(tool=make_tool(f"http://127.0.0.1:{port}"))

    assert not report.ok and "could not reach" in report.outcome


def test_of_several_misfits_one_is_named(service):
    result = call(make_tool(service.url), ticket_id="T-2", limit=0, tags=[1, 2], urgent="maybe")

    assert not result.success and "invalid arguments (" in result.content and service.received == []


def echoes_of(secret: str) -> dict[str, str]:
    """Each form ECHOES gives of `secret` and of its last word (the token, or
    Basic's credentials), and that word's start, which no cut may leave."""
    word = secret.split()[-1]
    forms = {"the start of its last word": word[:9]}
    for name, echo in ECHOES.items():
        if name == "late":
            continue
        if not name.startswith("basic"):
            forms |= {name: echo(secret), f"{name} of its last word": echo(word)}
        elif secret == BASIC:
            forms[name] = echo(secret)
    return forms


def leaked(text: str, secret: str) -> list[str]:
    """The forms of `secret` that `text` holds."""
    return [name for name, form in echoes_of(secret).items() if form in text]


@pytest.mark.parametrize(
    ("secret", "form"),
    [(SLASHED, name) for name in ECHOES if not name.startswith("basic")] + [(BASIC, name) for name in ECHOES],
)
def test_an_error_answer_echoing_the_secret_in_any_encoding_is_scrubbed_before_it_is_quoted(service, secret, form):
    tool = make_tool(
        service.url, path=f"/echo401/{form}", parameters={"type": "object", "properties": {}}, secret=secret
    )

    result = call(tool)

    assert service.received[0].headers["Authorization"] == secret
    assert not result.success and "HTTP 401 Unauthorized" in result.content and SCRUBBED in result.output["message"]
    assert leaked(result.output["message"], secret) == [] and leaked(result.content, secret) == []


def test_a_redirect_whose_location_carries_the_secret_is_scrubbed_too(service):
    tool = make_tool(service.url, path="/moved-echo", parameters={"type": "object", "properties": {}}, secret=SLASHED)

    result = call(tool)

    assert not result.success and "redirect to http://elsewhere.invalid/login?token=[secret]" in result.content
    assert leaked(result.output["message"], SLASHED) == []
