"""What every tool is: a name, a description and JSON-schema parameters the
model sees, a handler the engine calls, and whether the user must confirm it.

Handlers are called as `handler(context, **params)` and return a ToolResult
whose `content` the model reads (compact XML, seed 000) and whose `metadata`
goes into the `tool_complete` event for the page.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

AUTO = "auto"
CONFIRM = "confirm"


@dataclass
class ToolResult:
    success: bool
    content: str
    metadata: dict = field(default_factory=dict)


def tool_error(*, tool: str, message: str) -> ToolResult:
    """A call that failed, said so the model can correct it or tell the user."""
    return ToolResult(success=False, content=f"<error tool={quoteattr(tool)}>{escape(message)}</error>")


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


@dataclass
class ToolContext:
    """What a handler may use: the run's artifact manager and who asked."""

    artifacts: Any  # artifacts.manager.ArtifactManager
    user: Any = None
    run_id: int | None = None
