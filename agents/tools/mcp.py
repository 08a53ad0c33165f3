"""MCP servers: an administrator's Model Context Protocol server whose tools
the agents may call (agents.models.McpServer, docs/tools.md), through the
official `mcp` SDK, over stdio (a command the portal starts) or streamable HTTP.

A server's tools are listed at the start of a turn and kept in Django's cache
for DISCOVERY_CACHE_SECONDS, keyed by the row and its last change (a failure
is kept for DISCOVERY_FAILURE_SECONDS, so a hanging server delays one turn's
start, not every one's, until the admin saves or tests it); each is
offered as <server>__<tool>, with the server's description and input schema,
and its arguments are checked against that schema before the call.

The engine's handlers are synchronous (they run in a worker), and the SDK is
async: each discovery and each call opens a new session in an event loop of
its own, on a thread of its own, bounded as a whole by the server's timeout.
A session per call costs a process start over stdio, and buys a call that
cannot be disturbed by the last one's failure.

The secret goes in the secret header (HTTP) or the secret variable (stdio);
it is wiped from anything the server says back, as for HTTP tools.
"""

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import re
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

import anyio
import httpx
from django.core.cache import cache
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..models import McpServer
from ..secrets import SecretError, secret_pieces, secret_scrub
from ..source_checks import source_check_register
from .base import AUTO, CONFIRM, Tool, ToolContext, ToolResult, tool_error
from .files import file_artifact_keep
from .http import HttpToolError, arguments_checked

logger = logging.getLogger(__name__)

DISCOVERY_CACHE_SECONDS = 60
# A server whose discovery failed is not asked again for this long: one that
# hangs would otherwise hold the start of every turn for its whole timeout.
DISCOVERY_FAILURE_SECONDS = 30
# The longest tool name models accept (OpenAI's limit), and the characters they allow.
TOOL_NAME_MAX = 64
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
SEPARATOR = "__"
# What one server may put in the model's prompt: so many tools, so long a description each.
MAX_TOOLS = 100
MAX_DESCRIPTION_CHARS = 2000
# What one call's result may hold: text past it is cut (files: agents.tools.files).
MAX_TEXT_CHARS = 200_000
# How much longer than its timeout a session may take to close before the worker stops waiting.
CLOSE_GRACE_SECONDS = 5
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class McpError(Exception):
    """What failed, for the model or the admin; scrubbed of the secret."""


# --- the administrator's definition ----------------------------------------------------


def mcp_server_problems(*, server) -> dict[str, str]:
    """What is wrong with an McpServer's definition, by field; empty when nothing."""
    from ..config import AGENTS

    problems = {}
    unknown = [name for name in server.agents or [] if name not in AGENTS]
    if not isinstance(server.agents, list) or unknown:
        problems["agents"] = f"Agents are named from: {', '.join(AGENTS)}."
    if server.transport == "http":
        parts = urlsplit(server.url or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems["url"] = "The server's URL, starting with http:// or https://."
        elif "@" in parts.netloc:
            problems["url"] = "No user name or password in the URL: put a token in the secret header."
        if server.secret_header and not _HEADER_NAME.match(server.secret_header):
            problems["secret_header"] = "Not a header name."
    else:
        if not (server.command or "").strip():
            problems["command"] = "The program to start."
        if not isinstance(server.args, list) or not all(isinstance(a, str) for a in server.args):
            problems["args"] = 'The arguments are a JSON list of text, e.g. ["server.py", "--verbose"].'
        env = server.env
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and _ENV_NAME.match(k) for k, v in env.items()
        ):
            problems["env"] = 'The environment is a JSON object of names to text, e.g. {"LOG_LEVEL": "info"}.'
        if server.secret_env and not _ENV_NAME.match(server.secret_env):
            problems["secret_env"] = "Not a variable name."
        elif server.secret_env and isinstance(env, dict) and server.secret_env in env:
            problems["env"] = f"{server.secret_env} is the secret variable; it cannot also be a plain one."
    return problems


# --- sessions ----------------------------------------------------------------------------


def _secret(server) -> str:
    try:
        return server.secret_read()
    except SecretError as error:
        raise McpError(str(error)) from None


def _run(server, work, *, secret: str):
    """`work(session)` in a session of its own, on a thread with its own
    event loop, within the server's timeout; McpError for any failure."""
    outcome: dict = {}

    async def session_run():
        with anyio.fail_after(server.timeout):
            async with _transport(server, secret=secret) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                return await work(session)

    def thread():
        try:
            outcome["value"] = asyncio.run(session_run())
        # Every failure is reported to the caller; none escapes the thread.
        except BaseException as error:
            outcome["error"] = error

    runner = threading.Thread(target=thread, name=f"mcp-{server.name}", daemon=True)
    runner.start()
    runner.join(server.timeout + CLOSE_GRACE_SECONDS)
    if runner.is_alive() or isinstance(outcome.get("error"), TimeoutError):
        raise McpError(f"no answer within its timeout of {server.timeout} seconds")
    if "error" in outcome:
        raise McpError(_error_text(outcome["error"], secret_pieces(secret))) from None
    return outcome["value"]


def _transport(server, *, secret: str):
    if server.transport == "http":
        headers = {server.secret_header: secret} if server.secret_header and secret else {}
        # trust_env=False: a proxy from the environment would see the secret header.
        client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(server.timeout),
            follow_redirects=False,
            trust_env=False,
        )
        return _HttpStreams(client, server.url)
    env = dict(server.env or {})
    if server.secret_env and secret:
        env[server.secret_env] = secret
    parameters = StdioServerParameters(command=server.command, args=list(server.args or []), env=env)
    return stdio_client(parameters)


class _HttpStreams:
    """streamable_http_client with an httpx client that is closed with it."""

    def __init__(self, client: httpx.AsyncClient, url: str):
        self.client, self.url = client, url

    async def __aenter__(self):
        self.inner = streamable_http_client(self.url, http_client=self.client)
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc):
        try:
            return await self.inner.__aexit__(*exc)
        finally:
            await self.client.aclose()


def _error_text(error: BaseException, secrets: tuple[str, ...]) -> str:
    """One line for a failure, from inside the SDK's exception groups; scrubbed
    before it is cut, so that no cut leaves a part of the secret."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, httpx.HTTPStatusError):
        return f"the server answered HTTP {error.response.status_code}"
    if isinstance(error, httpx.ConnectError | ConnectionError | OSError):
        return f"could not reach it: {error or type(error).__name__}"
    text = " ".join(str(error).split()) or type(error).__name__
    return secret_scrub(text, secrets)[:500]


# --- discovery ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """One tool a server serves, as offered to the model."""

    name: str  # <server>__<tool>, safe for every model
    tool: str  # its name on the server
    description: str
    schema: dict


def offered_name(*, server: str, tool: str) -> str:
    """<server>__<tool> in the characters models allow, at most TOOL_NAME_MAX
    long; a name cut short ends with a hash of the whole, so two stay two."""
    name = f"{server}{SEPARATOR}{_NAME_UNSAFE.sub('_', tool)}"
    if len(name) <= TOOL_NAME_MAX:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: TOOL_NAME_MAX - 9]}_{digest}"


def _schema(value) -> dict:
    """The tool's input schema, or an empty object's when it is none the model could be given."""
    if not isinstance(value, dict) or value.get("type") != "object":
        return {"type": "object", "properties": {}}
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError:
        return {"type": "object", "properties": {}}
    return value


def _cache_key(server) -> str:
    return f"mcp:tools:{server.pk}:{server.updated_at.timestamp() if server.updated_at else 0}"


def _failure_key(server) -> str:
    return f"{_cache_key(server)}:failed"


def _listed_keep(server, listed: list[dict]) -> None:
    """What the server listed, for the next turns; a failure kept before is over."""
    cache.set(_cache_key(server), listed, DISCOVERY_CACHE_SECONDS)
    cache.delete(_failure_key(server))


def tools_listed(server, *, secret: str) -> list[dict]:
    """The tools the server serves, as it describes them (every page of them)."""

    async def work(session: ClientSession):
        listed, cursor = [], None
        while True:
            page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
            listed += [
                {"name": t.name, "description": t.description or "", "schema": t.inputSchema} for t in page.tools
            ]
            cursor = page.nextCursor
            if not cursor:
                return listed

    return _run(server, work, secret=secret)


def tools_discovered(server) -> list[Served]:
    """The server's tools, from the cache or asked for; McpError when the server cannot say."""
    listed = cache.get(_cache_key(server))
    if listed is None:
        if failure := cache.get(_failure_key(server)):
            raise McpError(failure)
        secret = _secret(server)
        try:
            listed = tools_listed(server, secret=secret)
        except McpError as error:
            message = secret_scrub(str(error), secret_pieces(secret))
            # For the operator: the Activity line is the conversation's owner's.
            logger.warning("MCP server %s is unavailable: %s", server.name, message)
            cache.set(_failure_key(server), message, DISCOVERY_FAILURE_SECONDS)
            raise McpError(message) from None
        _listed_keep(server, listed)
    served, names = [], set()
    for item in listed[:MAX_TOOLS]:
        name = offered_name(server=server.name, tool=item["name"])
        if name in names:
            continue
        names.add(name)
        description = item["description"][:MAX_DESCRIPTION_CHARS] or f"The {item['name']} tool of {server.name}."
        served.append(Served(name=name, tool=item["name"], description=description, schema=_schema(item["schema"])))
    return served


# --- a call --------------------------------------------------------------------------------


def _text_cut(text: str, notes: list[str]) -> str:
    if len(text) > MAX_TEXT_CHARS:
        notes.append(f"The result was cut at {MAX_TEXT_CHARS:,} characters.")
        return text[:MAX_TEXT_CHARS]
    return text


def _file_keep(*, context: ToolContext | None, name: str, data: str, mime: str) -> str:
    """Keep a file the tool returned (base64, as MCP sends it) as a file artifact; the line the result says of it."""
    try:
        content = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[a {mime} file that was not valid base64; not kept]"
    return file_artifact_keep(context=context, name=name, content=content, mime=mime)


def _content_text(
    result: types.CallToolResult, *, served: Served, context: ToolContext | None, secrets: tuple[str, ...]
) -> tuple[str, list[str]]:
    """The result as text, scrubbed before it is cut (no cut leaves a part of the secret), and its notes."""
    notes: list[str] = []
    parts, files = [], 0
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            files += 1
            parts.append(
                _file_keep(context=context, name=f"{served.name}_{files}", data=block.data, mime=block.mimeType)
            )
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(resource.text)
            else:
                files += 1
                stem = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or f"{served.name}_{files}"
                mime = resource.mimeType or "application/octet-stream"
                parts.append(_file_keep(context=context, name=stem, data=resource.blob, mime=mime))
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[a link to {block.uri}]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False, indent=1))
    return _text_cut(secret_scrub("\n".join(parts), secrets), notes), notes


def mcp_tool_call(server, served: Served, context: ToolContext | None, /, **params) -> ToolResult:
    """The handler of one served tool: every failure is a tool error the model reads."""
    secrets: tuple[str, ...] = ()
    try:
        try:
            typed = arguments_checked(schema=served.schema, params=params)
        except HttpToolError as error:
            raise McpError(str(error)) from None
        secret = _secret(server)
        secrets = secret_pieces(secret)

        async def work(session: ClientSession):
            return await session.call_tool(served.tool, typed)

        result = _run(server, work, secret=secret)
        text, notes = _content_text(result, served=served, context=context, secrets=secrets)
        if result.isError:
            raise McpError(text or "the tool failed and said nothing more")
    except McpError as error:
        return tool_error(tool=served.name, message=secret_scrub(f"{served.name}: {error}", secrets))
    attributes = f"tool={quoteattr(served.name)} server={quoteattr(server.name)}"
    return ToolResult(success=True, content=f"<mcp_result {attributes}>{escape(text)}</mcp_result>", notes=notes)


def mcp_tools_build(server) -> list[Tool]:
    """The Tools the engine offers for a configured McpServer; McpError when it cannot be reached."""

    def build(served: Served) -> Tool:
        # Positional-only: a parameter may be called "context".
        def handler(context: ToolContext, /, **params) -> ToolResult:
            return mcp_tool_call(server, served, context, **params)

        return Tool(
            name=served.name,
            description=served.description,
            parameters=served.schema,
            handler=handler,
            permission=CONFIRM if server.permission == CONFIRM else AUTO,
        )

    return [build(served) for served in tools_discovered(server)]


# --- the admin's Test connection ------------------------------------------------------------


@dataclass
class TestReport:
    ok: bool
    outcome: str  # the tools, "name: description" each, or what failed


def mcp_server_test(*, server) -> TestReport:
    """List the server's tools now, past the cache, as the model would be offered them."""
    secrets: tuple[str, ...] = ()
    try:
        secret = _secret(server)
        secrets = secret_pieces(secret)
        listed = tools_listed(server, secret=secret)
    except McpError as error:
        return TestReport(ok=False, outcome=secret_scrub(str(error), secrets))
    _listed_keep(server, listed)
    if not listed:
        return TestReport(ok=True, outcome="connected; it serves no tool")
    lines = [
        f"{offered_name(server=server.name, tool=item['name'])}: {' '.join((item['description'] or '').split())[:200]}"
        for item in listed
    ]
    return TestReport(ok=True, outcome=secret_scrub("; ".join(lines), secrets))


source_check_register(model=McpServer, check=lambda source: mcp_server_problems(server=source))
