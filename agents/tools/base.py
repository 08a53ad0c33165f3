"""What every tool is: a name, a description and JSON-schema parameters the
model sees, a handler the engine calls, and whether the user must confirm it.

Handlers are called as `handler(context, **params)` and return a ToolResult
whose `content` the model reads (compact XML, seed 000), and whose `output`
(the result as data: agents.event_schema.ToolOutput), `notes` and `metadata`
go into the `tool_complete` event for the page and the trace, which never
read the XML again.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from artifactflow.names import name_line

from ..event_schema import ErrorOutput, SourceData

AUTO = "auto"
CONFIRM = "confirm"
# How much of a page's text, or of a search's snippet, a source keeps as its excerpt.
SOURCE_EXCERPT_CHARS = 1000


@dataclass
class ToolResult:
    success: bool
    content: str
    # The result as data (agents.event_schema.ToolOutput), None only from a tool of no known shape.
    output: dict | None = None
    # Notes the content ends with, one by one.
    notes: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


def tool_error(*, tool: str, message: str) -> ToolResult:
    """A call that failed, said so the model can correct it or tell the user."""
    return ToolResult(
        success=False,
        content=f"<error tool={quoteattr(tool)}>{escape(message)}</error>",
        output=ErrorOutput(kind="error", message=message),
    )


def source_data(*, title: str, url: str, text: str, section: str = "", page: int | None = None) -> SourceData:
    """A page a tool found or read, with the start of `text` as its excerpt,
    and where in it, for a library passage (its headings, a PDF's page). Its
    title and section are the page's: each one line, with nothing that hides
    or reorders text."""
    excerpt = " ".join(text[: SOURCE_EXCERPT_CHARS * 2].split())[:SOURCE_EXCERPT_CHARS]
    data = SourceData(title=name_line(title), url=url, excerpt=excerpt)
    if section:
        data["section"] = name_line(section)
    if page:
        data["page"] = page
    return data


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict  # JSON schema of the arguments
    # None for a tool the engine routes itself (call_subagent).
    handler: Callable[..., ToolResult] | None
    permission: str = AUTO
    # A result too long for the context is stored as an artifact. Off for
    # tools that read artifacts, which would only store them again.
    spill: bool = True
    # For a tool whose call is a request to a service (an HTTP tool): what a
    # call with these params would send, {"method", "url"} and "refused" when
    # it would be refused before any request, computed as the handler
    # computes it, for the person asked to approve the call
    # (agents.event_schema.RequestShown). The call is made only if it would
    # still send what they approved.
    request_shown: Callable[[dict], dict] | None = None


@dataclass
class ToolContext:
    """What a handler may use: the run's artifact manager, who asked, and in
    which conversation (None outside a turn: nothing is kept for one)."""

    artifacts: Any  # artifacts.manager.ArtifactManager
    user: Any = None
    run_id: int | None = None
    conversation_id: Any = None
    # The project whose library the turn searches beside the team's (library.selectors.library_visible).
    project_id: int | None = None
