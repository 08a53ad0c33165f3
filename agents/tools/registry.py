"""The tools an administrator plugs in, as each turn offers them beside the
built-in ones (docs/tools.md).

A source is a function of the conversation's owner returning the configured
tools that person's conversations may use, each with the agents allowed to
call it. HTTP tools are one source, a row each; an MCP server is another kind
of source, yielding the several tools it serves (named <server>__<tool>). Every
source keeps to the same rules, which `sources_visible` applies to its rows:
enabled, and either open to everyone (no group) or to a group the owner is in.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from ..models import HttpTool, McpServer
from .base import Tool
from .http import http_tool_build
from .mcp import McpError, mcp_tools_build


@dataclass(frozen=True)
class Offered:
    tool: Tool
    agents: frozenset[str]


@dataclass(frozen=True)
class Unavailable:
    """A source that could not say what it offers (an MCP server that is
    down): the turn goes on without it, and its Activity says so."""

    source: str
    message: str


def sources_visible(rows: QuerySet, *, user) -> QuerySet:
    """The enabled rows of a ToolSource model that `user`'s conversations may use."""
    rows = rows.filter(enabled=True)
    if user is None:
        return rows.filter(groups__isnull=True)
    return rows.filter(Q(groups__isnull=True) | Q(groups__in=user.groups.all())).distinct()


def http_tools_offered(*, user) -> list[Offered]:
    return [
        Offered(tool=http_tool_build(row), agents=frozenset(row.agents))
        for row in sources_visible(HttpTool.objects.all(), user=user)
    ]


def mcp_tools_offered(*, user) -> list[Offered | Unavailable]:
    """Each visible MCP server's tools, discovered now (or from the cache);
    a server that cannot be reached is Unavailable rather than a failed turn."""
    offered: list[Offered | Unavailable] = []
    for server in sources_visible(McpServer.objects.all(), user=user):
        try:
            tools = mcp_tools_build(server)
        except McpError as error:
            offered.append(Unavailable(source=server.name, message=str(error)))
            continue
        offered += [Offered(tool=tool, agents=frozenset(server.agents)) for tool in tools]
    return offered


# Each kind of configured source, in the order their tools are listed.
SOURCES: list[Callable[..., list[Offered | Unavailable]]] = [http_tools_offered, mcp_tools_offered]


def configured_tools(
    *, user, taken: set[str], unavailable: list[Unavailable] | None = None
) -> dict[str, tuple[Tool, ...]]:
    """Agent name → the configured tools it is offered in `user`'s
    conversations. A name already `taken` (a built-in tool, an earlier
    source's) is skipped: the model must never be offered two tools of one name.
    Sources that could not be reached are added to `unavailable`, if given."""
    names = set(taken)
    by_agent: dict[str, list[Tool]] = {}
    for source in SOURCES:
        for offered in source(user=user):
            if isinstance(offered, Unavailable):
                if unavailable is not None:
                    unavailable.append(offered)
                continue
            if offered.tool.name in names:
                continue
            names.add(offered.tool.name)
            for agent in offered.agents:
                by_agent.setdefault(agent, []).append(offered.tool)
    return {agent: tuple(tools) for agent, tools in by_agent.items()}
