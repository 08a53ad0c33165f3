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

from ..models import HttpTool
from .base import Tool
from .http import http_tool_build


@dataclass(frozen=True)
class Offered:
    tool: Tool
    agents: frozenset[str]


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


# Each kind of configured source, in the order their tools are listed.
SOURCES: list[Callable[..., list[Offered]]] = [http_tools_offered]


def configured_tools(*, user, taken: set[str]) -> dict[str, tuple[Tool, ...]]:
    """Agent name → the configured tools it is offered in `user`'s
    conversations. A name already `taken` (a built-in tool, an earlier
    source's) is skipped: the model must never be offered two tools of one name."""
    names = set(taken)
    by_agent: dict[str, list[Tool]] = {}
    for source in SOURCES:
        for offered in source(user=user):
            if offered.tool.name in names:
                continue
            names.add(offered.tool.name)
            for agent in offered.agents:
                by_agent.setdefault(agent, []).append(offered.tool)
    return {agent: tuple(tools) for agent, tools in by_agent.items()}
