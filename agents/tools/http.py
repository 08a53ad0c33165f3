"""HTTP tools: an administrator's declarative tool for an internal REST
endpoint (agents.models.HttpTool, docs/tools.md).

The administrator fixes the method, the URL's scheme, host and path, and a
JSON Schema of the parameters whose every property says where it goes with
"x-in": `path` (a {placeholder} of the URL's path, quoted), `query` or `body`
(a JSON object). The model only fills values in: it never chooses the host.
Internal hosts are what these tools are for, so web_fetch's guard against
private addresses does not apply; redirects are not followed, so an answer
cannot send the call (and its secret header) anywhere else.

The secret header's value is decrypted only to make the request, and wiped
from anything the call reports (an error page that echoes headers), in every
form a service may echo it (agents.secrets.secret_scrub), so it never
reaches the model, the event log, a page, the trace, the checkpoint or a log
line.
"""

import json
import re
import time
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit
from xml.sax.saxutils import escape, quoteattr

import httpx
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from ..models import HttpTool
from ..secrets import SecretError, secret_pieces, secret_scrub
from ..source_checks import source_check_register
from .base import AUTO, CONFIRM, Tool, ToolContext, ToolResult, tool_error
from .files import file_artifact_keep
from .web import body_read_capped

LOCATIONS = ("path", "query", "body")
IN = "x-in"
# What one call reads of an answer; past it the answer is cut, and said to be.
MAX_BYTES = 2 * 1024 * 1024
# How much of an error answer's body the model is told.
ERROR_BODY_CHARS = 500
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_BINARY = ("image/", "audio/", "video/", "application/pdf", "application/octet-stream", "application/zip")
_USER_AGENT = "ArtifactFlow HTTP tool"
# What a server may read as a dot or a slash after NFKC leaves it alone: the
# ideographic full stops (IDNA's label separators) and the division and fraction slashes.
_LOOKALIKES = str.maketrans({"\u3002": ".", "\uff61": ".", "\u2215": "/", "\u2044": "/"})
# Where servers end a path segment's name: a ";parameter" (Tomcat), a query or fragment once decoded, a NUL.
_SEGMENT_END = re.compile(r"[;?#\x00]")


class HttpToolError(Exception):
    """A call that failed; the message is for the model, scrubbed of the secret."""


# --- the administrator's definition ----------------------------------------------------


def http_tool_problems(*, tool) -> dict[str, str]:
    """What is wrong with an HttpTool's definition, by field; empty when nothing."""
    from ..config import AGENTS

    problems = {}
    builtin = {t.name for config in AGENTS.values() for t in config.tools}
    if tool.name in builtin:
        problems["name"] = f"{tool.name} is the name of a built-in tool."
    unknown = [name for name in tool.agents or [] if name not in AGENTS]
    if not isinstance(tool.agents, list) or unknown:
        problems["agents"] = f"Agents are named from: {', '.join(AGENTS)}."
    placeholders, url_problem = _template_read(tool.url_template or "")
    if url_problem:
        problems["url_template"] = url_problem
    schema_problem = _schema_problem(tool.parameters, placeholders=placeholders)
    if schema_problem:
        problems["parameters"] = schema_problem
    headers = tool.headers
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _HEADER_NAME.match(k) for k, v in headers.items()
    ):
        problems["headers"] = 'Headers are a JSON object of names to text values, e.g. {"Accept": "application/json"}.'
    elif tool.secret_header and tool.secret_header.lower() in {k.lower() for k in headers}:
        problems["headers"] = f"{tool.secret_header} is the secret header; it cannot also be a plain one."
    if tool.secret_header and not _HEADER_NAME.match(tool.secret_header):
        problems["secret_header"] = "Not a header name."
    return problems


def _template_read(template: str) -> tuple[list[str], str]:
    """The path placeholders of a URL template, and what is wrong with it."""
    try:
        parts = urlsplit(template)
    except ValueError as error:
        return [], f"Not a URL: {error}."
    if parts.scheme not in ("http", "https"):
        return [], "The URL starts with http:// or https://."
    if not parts.hostname:
        return [], "The URL names no host."
    if "{" in parts.netloc or "}" in parts.netloc:
        return [], "The host is fixed: no {placeholder} before the path."
    if "@" in parts.netloc:
        return [], "No user name or password in the URL: put a token in the secret header."
    if _PLACEHOLDER.search(parts.query) or _PLACEHOLDER.search(parts.fragment) or parts.fragment:
        return [], "Placeholders go only in the path; query parameters are properties with x-in: query."
    placeholders = _PLACEHOLDER.findall(parts.path)
    bad = [name for name in placeholders if not _PARAM_NAME.match(name)]
    if bad:
        return [], f"Not a parameter name: {{{bad[0]}}}."
    return placeholders, ""


def _schema_problem(schema, *, placeholders: list[str]) -> str:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'The parameters are a JSON Schema of "type": "object".'
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return f"Not a valid JSON Schema: {error.message}"
    properties = schema.get("properties", {})
    for name, spec in properties.items():
        if not _PARAM_NAME.match(name):
            return f"Not a parameter name: {name}."
        if not isinstance(spec, dict) or spec.get(IN) not in LOCATIONS:
            return f'Property {name} needs "x-in": "path", "query" or "body".'
    in_path = {name for name, spec in properties.items() if spec[IN] == "path"}
    if missing := [name for name in placeholders if name not in in_path]:
        return f'{{{missing[0]}}} of the URL needs a property with "x-in": "path".'
    if unused := sorted(in_path - set(placeholders)):
        return f"Property {unused[0]} goes in the path, but the URL has no {{{unused[0]}}}."
    if optional := sorted(in_path - set(schema.get("required", []))):
        return f"Path parameter {optional[0]} must be required."
    return ""


def model_parameters(schema: dict) -> dict:
    """The schema the model is shown: where each parameter goes is not its business."""
    properties = {
        name: {key: value for key, value in spec.items() if key != IN}
        for name, spec in schema.get("properties", {}).items()
    }
    return {**schema, "properties": properties}


# --- a call -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    method: str
    url: str
    query: dict
    body: dict | None

    @property
    def target(self) -> httpx.URL:
        """The URL the request goes to, query included (added to any the
        administrator's URL has): what request_send requests, and what Test
        connection and the approval prompt show."""
        return httpx.URL(self.url).copy_merge_params(self.query) if self.query else httpx.URL(self.url)


def arguments_checked(*, schema: dict, params: dict) -> dict:
    """The arguments as the schema types them (a call written as text gives
    every value as text), or HttpToolError naming the first that does not fit."""
    properties = schema.get("properties", {})
    typed = {}
    for name, value in params.items():
        types = properties.get(name, {}).get("type")
        types = [types] if isinstance(types, str) else types or []
        if isinstance(value, str) and types and "string" not in types:
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        typed[name] = value
    error = best_match(Draft202012Validator(schema).iter_errors(typed))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path)
        raise HttpToolError(f"invalid arguments{f' ({where})' if where else ''}: {error.message[:300]}")
    return typed


def request_prepared(*, tool, params: dict) -> Prepared:
    """Where each argument goes: the path (quoted, so it cannot leave its
    segment; HttpToolError for a value some server could read as another
    path, path_value_problem), the query or the JSON body, as the schema's
    x-in says."""
    properties = tool.parameters.get("properties", {})
    # In the schema's order, not the call's: the call read back from a checkpoint
    # (Postgres's jsonb orders keys its own way) makes the request its prompt showed.
    given = [name for name in properties if name in params]

    def fill(match: re.Match) -> str:
        name = match.group(1)
        text = _text(params[name])
        if problem := path_value_problem(text):
            shown = text if len(text) <= 80 else f"{text[:80]}…"
            raise HttpToolError(
                f"invalid arguments ({name}): {shown!r} would not stay one segment of the URL's path: {problem}"
            )
        return quote(text, safe="")

    url = _PLACEHOLDER.sub(fill, tool.url_template)
    query = {name: _query_value(params[name]) for name in given if properties[name][IN] == "query"}
    has_body = any(spec.get(IN) == "body" for spec in properties.values())
    body = {name: params[name] for name in given if properties[name][IN] == "body"} if has_body else None
    return Prepared(method=tool.method, url=url, query=query, body=body)


def path_value_problem(text: str) -> str:
    """Why a path value could take the request to another path of the host on
    some server, or "" when it cannot. Quoting keeps a value in its segment for
    the client, and httpx, like every RFC 3986 client, removes a segment that
    is "." or ".."; servers, proxies and frameworks go further: they decode
    percent-escapes (nginx, once; some twice), fold Unicode (full-width and
    leader dots, IIS), read "\\" as "/", end a segment at ";" (Tomcat) or a
    NUL, trim blanks, merge "//". Encoding dots as %2E would leave all of
    that to the server, so a value is refused when, read every way at once,
    it or any part of it between slashes is empty or only dots. No id, name
    or file path is like that."""
    decoded = text
    try:
        # Each pass that decodes something shortens the text, so this ends.
        while (once := unquote(decoded, errors="strict")) != decoded:
            decoded = once
    except UnicodeDecodeError:
        # Old decoders read overlong forms such as %c0%ae as a dot.
        return "its percent-escapes do not decode to UTF-8 text"
    folded = unicodedata.normalize("NFKC", decoded).translate(_LOOKALIKES)
    for part in re.split(r"[/\\]", folded):
        # Blanks, controls and invisible format characters, which servers trim or drop, are not read.
        kept = "".join(c for c in _SEGMENT_END.split(part, 1)[0] if unicodedata.category(c)[0] not in "CZ")
        if not kept:
            return "a path value may not be empty or blank, nor have an empty part between slashes"
        if not kept.strip("."):
            return (
                "a path value may not be only dots (in any spelling: .., %2e%2e, ．．), "
                "nor have such a part between slashes"
            )
    return ""


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _query_value(value):
    return [_text(item) for item in value] if isinstance(value, list) else _text(value)


@dataclass
class Answer:
    status: int
    reason: str
    content_type: str
    body: bytes
    cut: bool
    location: str
    elapsed_ms: int


def request_send(*, tool, prepared: Prepared, secret: str) -> Answer:
    """One request with the tool's timeout for the whole of it, no redirect
    followed, the body read up to MAX_BYTES; HttpToolError on a timeout or
    an unreachable host."""
    headers = {"User-Agent": _USER_AGENT, **tool.headers}
    if tool.secret_header and secret:
        headers[tool.secret_header] = secret
    deadline = time.monotonic() + tool.timeout
    started = time.monotonic()
    # trust_env=False: a proxy from the environment would see the secret header.
    try:
        with (
            httpx.Client(timeout=tool.timeout, follow_redirects=False, trust_env=False) as client,
            client.stream(prepared.method, prepared.target, json=prepared.body, headers=headers) as response,
        ):
            body, cut = body_read_capped(response, deadline=deadline, limit=MAX_BYTES)
    except httpx.TimeoutException:
        raise HttpToolError(f"no answer within its timeout of {tool.timeout} seconds") from None
    except httpx.HTTPError as error:
        raise HttpToolError(f"could not reach {_origin(tool.url_template)}: {error or type(error).__name__}") from None
    return Answer(
        status=response.status_code,
        reason=response.reason_phrase,
        content_type=response.headers.get("content-type", "").split(";")[0].strip().lower(),
        body=body,
        cut=cut,
        location=response.headers.get("location", ""),
        elapsed_ms=int((time.monotonic() - started) * 1000),
    )


def _origin(template: str) -> str:
    parts = urlsplit(template)
    return f"{parts.scheme}://{parts.netloc}"


def extract(value, path: str):
    """The part of a JSON value at `path`: a JSON pointer (/data/0/name) or a
    dotted path (data.0.name); HttpToolError when the answer has no such part."""
    parts = (
        [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
        if path.startswith("/")
        else path.split(".")
    )
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise HttpToolError(f"the answer has nothing at {path} (no {part!r} there)")
    return value


def _result(*, tool, answer: Answer, secrets: tuple[str, ...], context: ToolContext | None) -> ToolResult:
    attributes = (
        f"tool={quoteattr(tool.name)} status={quoteattr(str(answer.status))} "
        f"content_type={quoteattr(answer.content_type or 'unknown')}"
    )
    notes = [f"The answer was cut at {MAX_BYTES:,} bytes; the rest was not read."] if answer.cut else []
    metadata = {"status": answer.status, "bytes": len(answer.body)}
    if answer.content_type.startswith(_BINARY):
        # Not text: kept as a file artifact for the person (a whole answer only), named for the model.
        kept = (
            ""
            if answer.cut
            else file_artifact_keep(
                context=context, name=f"{tool.name}_answer", content=answer.body, mime=answer.content_type
            )
        )
        text = f"The answer is a file of type {answer.content_type}, {len(answer.body):,} bytes, which this tool cannot read. {kept}".strip()
        return ToolResult(
            success=True, content=f"<http_result {attributes}>{escape(text)}</http_result>", metadata=metadata
        )
    text = answer.body.decode("utf-8", errors="replace")
    is_json = answer.content_type == "application/json" or answer.content_type.endswith("+json")
    if is_json or tool.response_path:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            if tool.response_path:
                raise HttpToolError(f"the answer is not JSON ({answer.content_type or 'no content type'})") from None
        else:
            if tool.response_path:
                value = extract(value, tool.response_path)
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    content = f"<http_result {attributes}>{escape(secret_scrub(text, secrets))}</http_result>"
    return ToolResult(success=True, content=content, notes=notes, metadata=metadata)


def http_tool_call(tool, context: ToolContext | None, /, **params) -> ToolResult:
    """The handler of a configured HttpTool: every failure is a tool error the model reads."""
    secrets: tuple[str, ...] = ()
    try:
        typed = arguments_checked(schema=tool.parameters, params=params)
        try:
            secret = tool.secret_read()
        except SecretError as error:
            raise HttpToolError(str(error)) from None
        secrets = secret_pieces(secret)
        prepared = request_prepared(tool=tool, params=typed)
        answer = request_send(tool=tool, prepared=prepared, secret=secret)
        if 300 <= answer.status < 400:
            location = _excerpt(answer.location, secrets) or "nowhere said"
            raise HttpToolError(
                f"the service answered HTTP {answer.status}, a redirect to {location}; "
                "HTTP tools follow no redirect (the administrator sets the final URL)"
            )
        if answer.status >= 400:
            start = _excerpt(answer.body.decode("utf-8", errors="replace"), secrets)
            said = f": {start}" if start else ""
            raise HttpToolError(f"the service answered HTTP {answer.status} {_excerpt(answer.reason, secrets)}{said}")
        return _result(tool=tool, answer=answer, secrets=secrets, context=context)
    except HttpToolError as error:
        return tool_error(tool=tool.name, message=secret_scrub(f"{tool.name}: {error}", secrets))


def _excerpt(text: str, secrets: tuple[str, ...]) -> str:
    """The start of what a service said, for the model: the whole scrubbed
    first, so that no cut leaves a part of the secret too short to be known."""
    return " ".join(secret_scrub(text, secrets).split())[:ERROR_BODY_CHARS]


def http_request_shown(*, tool, params: dict) -> dict:
    """What a call with these arguments would send, for the person asked to
    approve it (agents.event_schema.RequestShown): the method and the URL as
    request_send requests it, from the same code (request_prepared,
    Prepared.target); with why it would be refused before any request when it
    would be, and then the tool's URL template."""
    try:
        prepared = request_prepared(tool=tool, params=arguments_checked(schema=tool.parameters, params=params))
    except HttpToolError as error:
        return {"method": tool.method, "url": tool.url_template, "refused": str(error)}
    return {"method": prepared.method, "url": str(prepared.target)}


def http_tool_build(tool) -> Tool:
    """The Tool the engine offers for a configured HttpTool row."""

    # Positional-only: a parameter may be called "context" or "tool".
    def handler(context: ToolContext, /, **params) -> ToolResult:
        return http_tool_call(tool, context, **params)

    return Tool(
        name=tool.name,
        description=tool.description,
        parameters=model_parameters(tool.parameters),
        handler=handler,
        permission=CONFIRM if tool.permission == CONFIRM else AUTO,
        request_shown=lambda params: http_request_shown(tool=tool, params=params),
    )


# --- the admin's Test connection ------------------------------------------------------------


@dataclass
class TestReport:
    ok: bool
    request: str  # "GET https://…", as sent (no header)
    outcome: str  # "HTTP 200 OK, application/json, 120 bytes, 35 ms", or what failed


def http_tool_test(*, tool) -> TestReport:
    """One request to see that the service answers, with the secret header:
    a GET of the URL with the schema's example values when the tool is a GET
    whose path parameters all have one; otherwise a HEAD of the host's root,
    which changes nothing. The report says which it was."""
    properties = tool.parameters.get("properties", {}) if isinstance(tool.parameters, dict) else {}
    examples = {name: value for name, spec in properties.items() if (value := _example(spec)) is not None}
    path_names = [name for name, spec in properties.items() if spec.get(IN) == "path"]
    if tool.method == "GET" and all(name in examples for name in path_names):
        wanted = {n: v for n, v in examples.items() if properties[n].get(IN) in ("path", "query")}
        try:
            prepared = request_prepared(tool=tool, params=wanted)
        except HttpToolError as error:
            return TestReport(ok=False, request=f"GET {tool.url_template}", outcome=f"not sent, an example: {error}")
    else:
        prepared = Prepared(method="HEAD", url=_origin(tool.url_template) + "/", query={}, body=None)
    shown = str(prepared.target)
    secrets: tuple[str, ...] = ()
    try:
        secret = tool.secret_read()
        secrets = secret_pieces(secret)
        answer = request_send(tool=tool, prepared=prepared, secret=secret)
    except (SecretError, HttpToolError) as error:
        return TestReport(ok=False, request=f"{prepared.method} {shown}", outcome=secret_scrub(str(error), secrets))
    kind = answer.content_type or "no content type"
    outcome = f"HTTP {answer.status} {answer.reason}, {kind}, {len(answer.body):,} bytes, {answer.elapsed_ms} ms"
    if answer.location:
        outcome += f", redirect to {answer.location}"
    return TestReport(
        ok=answer.status < 400, request=f"{prepared.method} {shown}", outcome=secret_scrub(outcome, secrets)
    )


def _example(spec: dict):
    if isinstance(spec.get("examples"), list) and spec["examples"]:
        return spec["examples"][0]
    return spec.get("default", spec.get("example"))


source_check_register(model=HttpTool, check=lambda source: http_tool_problems(tool=source))
