"""The artifact tools agents call, for the engine to register. Each returns a
compact XML result the model reads (seed 000) and, for the event log, what it
changed: the artifact's id and version and how many characters went and came.
The text itself is in the live cache and, once the turn ends, the database."""

from collections.abc import Callable
from xml.sax.saxutils import escape, quoteattr

from agents.tooling import Tool, ToolContext, ToolResult

from .manager import ArtifactError, ArtifactManager, Change


def _error(tool: str, artifact_id: str, message: str) -> ToolResult:
    return ToolResult(
        success=False,
        content=f"<error tool={quoteattr(tool)}><id>{escape(artifact_id)}</id><message>{escape(message)}</message></error>",
    )


def _changed(change: Change, message: str, **attrs) -> ToolResult:
    working = change.artifact
    extra = "".join(f" {key}={quoteattr(str(value))}" for key, value in attrs.items())
    return ToolResult(
        success=True,
        content=f'<artifact version="{working.version}"{extra}><id>{escape(working.artifact_id)}</id>{escape(message)}</artifact>',
        metadata={
            "artifact_change": {
                "artifact_id": working.artifact_id,
                "title": working.title,
                "version": working.version,
                "length": len(working.content),
                "removed": change.removed,
                "added": change.added,
            }
        },
    )


def create_artifact(manager: ArtifactManager, *, id: str, content: str, title: str = "", content_type: str = "text/markdown") -> ToolResult:
    try:
        change = manager.create(artifact_id=id, content=content, title=title, content_type=content_type)
    except ArtifactError as exc:
        return _error("create_artifact", id, str(exc))
    return _changed(change, "Created.")


def update_artifact(manager: ArtifactManager, *, id: str, old_str: str, new_str: str) -> ToolResult:
    try:
        change = manager.update(artifact_id=id, old_str=old_str, new_str=new_str)
    except ArtifactError as exc:
        return _error("update_artifact", id, str(exc))
    how = {
        "exact": "",
        "normalized": " old_str matched after normalising quotes, dashes and spaces.",
        "fuzzy": f" old_str matched approximately ({change.similarity:.0%} similar); read the artifact before relying on its exact text.",
    }[change.layer]
    message = "Updated." + how
    return _changed(change, message, layer=change.layer, similarity=f"{change.similarity:.2f}")


def rewrite_artifact(manager: ArtifactManager, *, id: str, content: str) -> ToolResult:
    try:
        change = manager.rewrite(artifact_id=id, content=content)
    except ArtifactError as exc:
        return _error("rewrite_artifact", id, str(exc))
    return _changed(change, "Rewritten.")


def read_artifact(manager: ArtifactManager, *, id: str, version: int | None = None) -> ToolResult:
    try:
        artifact = manager.read(artifact_id=id, version=version)
    except ArtifactError as exc:
        return _error("read_artifact", id, str(exc))
    return ToolResult(
        success=True,
        content=(
            f'<artifact id={quoteattr(artifact["artifact_id"])} version="{artifact["version"]}" '
            f'content_type={quoteattr(artifact["content_type"])} title={quoteattr(artifact["title"])}>'
            f'<content>{escape(artifact["content"])}</content></artifact>'
        ),
    )


def _on_manager(function: Callable[..., ToolResult]) -> Callable[..., ToolResult]:
    def handler(context: ToolContext, **params) -> ToolResult:
        return function(context.artifacts, **params)

    return handler


_ID = {"type": "string", "description": "The artifact id, e.g. task_plan or research_report.md"}

ARTIFACT_TOOLS = [
    Tool(
        name="create_artifact",
        description="Create a new artifact. Refused when the id exists; then update or rewrite it.",
        parameters={
            "type": "object",
            "properties": {
                "id": _ID,
                "content": {"type": "string"},
                "title": {"type": "string"},
                "content_type": {"type": "string", "description": "MIME type; text/markdown by default"},
            },
            "required": ["id", "content"],
        },
        handler=_on_manager(create_artifact),
    ),
    Tool(
        name="update_artifact",
        description=(
            "Replace old_str by new_str in an artifact. old_str must match one place; small "
            "differences in quotes, dashes, spaces or a few typos are tolerated and reported."
        ),
        parameters={
            "type": "object",
            "properties": {"id": _ID, "old_str": {"type": "string"}, "new_str": {"type": "string"}},
            "required": ["id", "old_str", "new_str"],
        },
        handler=_on_manager(update_artifact),
    ),
    Tool(
        name="rewrite_artifact",
        description="Replace the whole content of an artifact (for changes too large for update_artifact).",
        parameters={
            "type": "object",
            "properties": {"id": _ID, "content": {"type": "string"}},
            "required": ["id", "content"],
        },
        handler=_on_manager(rewrite_artifact),
    ),
    Tool(
        name="read_artifact",
        description="Read an artifact's current content, or a saved earlier version.",
        parameters={
            "type": "object",
            "properties": {"id": _ID, "version": {"type": "integer"}},
            "required": ["id"],
        },
        handler=_on_manager(read_artifact),
        spill=False,
    ),
]
