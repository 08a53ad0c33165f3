"""The artifact tools agents call, for the engine to register. Each returns a
compact XML result the model reads (seed 000) and, for the event log, what it
changed: the artifact's id and version and how many characters went and came.
The text itself is in the live cache and, once the turn ends, the database."""

from collections.abc import Callable
from xml.sax.saxutils import escape, quoteattr

from django.conf import settings

from artifacts.manager import ArtifactError, ArtifactManager, Change

from ..event_schema import ArtifactOutput, ErrorOutput
from ..tokens import tokens_estimate, tokens_prefix
from .base import Tool, ToolContext, ToolResult


def _error(tool: str, artifact_id: str, message: str) -> ToolResult:
    return ToolResult(
        success=False,
        content=f"<error tool={quoteattr(tool)}><id>{escape(artifact_id)}</id><message>{escape(message)}</message></error>",
        output=ErrorOutput(kind="error", message=message),
    )


# The person's lines a warning quotes, each cut to this length.
DROPPED_QUOTED, DROPPED_QUOTE_CHARS = 3, 120


def _dropped_notes(dropped: list[str]) -> list[str]:
    """Tells the model, and the user in the step, that a change took out text
    a person wrote: the change stands, but the model is asked to put it back."""
    if not dropped:
        return []
    quoted = "; ".join(
        f"“{line[:DROPPED_QUOTE_CHARS]}{'…' if len(line) > DROPPED_QUOTE_CHARS else ''}”"
        for line in dropped[:DROPPED_QUOTED]
    )
    more = f" and {len(dropped) - DROPPED_QUOTED} more" if len(dropped) > DROPPED_QUOTED else ""
    note = (
        f"This change left out {len(dropped)} line{'s' if len(dropped) != 1 else ''} a person wrote in the "
        f"artifact since an agent last saved it: {quoted}{more}. Put their text back with update_artifact "
        "unless the user asked for it to go; if it stays out, the user is told when the turn ends."
    )
    return [note]


def _changed(change: Change, message: str, **attrs) -> ToolResult:
    working = change.artifact
    extra = "".join(f" {key}={quoteattr(str(value))}" for key, value in attrs.items())
    notes = _dropped_notes(change.dropped)
    return ToolResult(
        success=True,
        content=f'<artifact version="{working.version}"{extra}><id>{escape(working.artifact_id)}</id>{escape(message)}</artifact>'
        + "".join(f"\n<note>{escape(note)}</note>" for note in notes),
        output=ArtifactOutput(
            kind="artifact", artifact_id=working.artifact_id, title=working.title, version=working.version
        ),
        notes=notes,
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


def create_artifact(
    manager: ArtifactManager, *, id: str, content: str, title: str = "", content_type: str = "text/markdown"
) -> ToolResult:
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


def read_artifact(
    manager: ArtifactManager,
    *,
    id: str,
    version: int | None = None,
    start_line: int | None = None,
    end_line: int | None = None,
    offset: int | None = None,
    limit: int | None = None,
) -> ToolResult:
    """The artifact's text, or the part of it asked for in lines (1-based,
    inclusive) or characters. No read returns more than TOOL_RESULT_MAX_CHARS
    characters or TOOL_RESULT_MAX_TOKENS estimated tokens: a large artifact,
    such as a spilled tool result (seed 001), is read a part at a time, and a
    note says how to ask for the next one."""
    try:
        artifact = manager.read(artifact_id=id, version=version)
    except ArtifactError as exc:
        return _error("read_artifact", id, str(exc))
    try:
        text, held, note = _part(
            artifact["content"], start_line=start_line, end_line=end_line, offset=offset, limit=limit
        )
    except ValueError as exc:
        return _error("read_artifact", id, str(exc))
    attrs = "".join(f" {key}={quoteattr(value)}" for key, value in held.items())
    return ToolResult(
        success=True,
        content=(
            f'<artifact id={quoteattr(artifact["artifact_id"])} version="{artifact["version"]}" '
            f"content_type={quoteattr(artifact['content_type'])} title={quoteattr(artifact['title'])}{attrs}>"
            f"<content>{escape(text)}</content>{f'<note>{escape(note)}</note>' if note else ''}</artifact>"
        ),
        output=ArtifactOutput(
            kind="artifact", artifact_id=artifact["artifact_id"], title=artifact["title"], version=artifact["version"]
        ),
    )


# The text to return, the range it is (as XML attributes) and a note on how to read on.
_Part = tuple[str, dict[str, str], str]


def _part(content: str, *, start_line, end_line, offset, limit) -> _Part:
    """Raises ValueError for a range the model has to correct."""
    by_lines = start_line is not None or end_line is not None
    by_chars = offset is not None or limit is not None
    if by_lines and by_chars:
        raise ValueError("Give a range in lines (start_line, end_line) or in characters (offset, limit), not both.")
    lines = content.splitlines(keepends=True)
    size = f"{len(content)} characters, {len(lines)} lines"
    most = settings.TOOL_RESULT_MAX_CHARS
    if by_lines:
        return _lines_part(lines, start=1 if start_line is None else start_line, end=end_line, size=size, most=most)
    if by_chars or len(content) > most or tokens_estimate(text=content) > settings.TOOL_RESULT_MAX_TOKENS:
        return _chars_part(content, offset=offset or 0, limit=most if limit is None else limit, size=size, most=most)
    return content, {}, ""


def _one_read(most: int, *, by_tokens: bool) -> str:
    if not by_tokens:
        return f"{most} characters"
    # Chinese, Japanese and Korean text meets the token limit long before the character one.
    return f"{settings.TOOL_RESULT_MAX_TOKENS} tokens (about a character each in Chinese, Japanese or Korean)"


def _lines_part(lines: list[str], *, start: int, end: int | None, size: str, most: int) -> _Part:
    total = len(lines)
    if start < 1 or (end is not None and end < 1):
        raise ValueError("Lines are numbered from 1.")
    if end is not None and end < start:
        raise ValueError(f"end_line {end} is before start_line {start}.")
    if start > total:
        raise ValueError(f"start_line {start} is beyond the end: the artifact has {size}.")
    end = total if end is None else min(end, total)
    # Whole lines, as many of those asked for as fit in one read.
    stop, length = start - 1, 0
    while stop < end and length + len(lines[stop]) <= most:
        length += len(lines[stop])
        stop += 1
    stop = _lines_within_tokens(lines, start=start, stop=stop)
    if stop < start:
        first = sum(len(line) for line in lines[: start - 1])
        one_read = _one_read(most, by_tokens=len(lines[start - 1]) <= most)
        raise ValueError(
            f"Line {start} alone is longer than one read ({one_read}); read it in characters: offset={first}, limit={most}."
        )
    note = ""
    if stop < total:
        note = f"This is lines {start}-{stop}; the artifact has {size}. Read on with start_line={stop + 1}."
    return "".join(lines[start - 1 : stop]), {"lines": f"{start}-{stop}", "of": str(total)}, note


def _lines_within_tokens(lines: list[str], *, start: int, stop: int) -> int:
    """The last of lines `start`..`stop` that fit in one read's tokens with those before it."""
    most = settings.TOOL_RESULT_MAX_TOKENS
    if tokens_estimate(text="".join(lines[start - 1 : stop])) <= most:
        return stop
    low, high = start - 1, stop - 1
    while low < high:
        middle = (low + high + 1) // 2
        if tokens_estimate(text="".join(lines[start - 1 : middle])) <= most:
            low = middle
        else:
            high = middle - 1
    return low


def _chars_part(content: str, *, offset: int, limit: int, size: str, most: int) -> _Part:
    if offset < 0:
        raise ValueError("offset cannot be negative.")
    if limit < 1:
        raise ValueError("limit must be at least 1.")
    if offset and offset >= len(content):
        raise ValueError(f"offset {offset} is beyond the end: the artifact has {size}.")
    stop = min(offset + min(limit, most), len(content))
    text = tokens_prefix(text=content[offset:stop], tokens=settings.TOOL_RESULT_MAX_TOKENS)
    by_tokens, stop = offset + len(text) < stop, offset + len(text)
    note = ""
    if stop < len(content):
        note = (
            f"This is characters {offset}-{stop}; the artifact has {size}, and one read returns at most "
            f"{_one_read(most, by_tokens=by_tokens)}. "
            f"Read on with offset={stop} and limit={most}, or by lines with start_line and end_line."
        )
    return text, {"chars": f"{offset}-{stop}", "of": str(len(content))}, note


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
        description=(
            "Read an artifact's current content, or a saved earlier version. A long artifact comes a part "
            "at a time: ask for lines (start_line, end_line) or characters (offset, limit), not both."
        ),
        parameters={
            "type": "object",
            "properties": {
                "id": _ID,
                "version": {"type": "integer"},
                "start_line": {"type": "integer", "description": "First line to read, from 1"},
                "end_line": {"type": "integer", "description": "Last line to read, included"},
                "offset": {"type": "integer", "description": "First character to read, from 0"},
                "limit": {"type": "integer", "description": "How many characters to read"},
            },
            "required": ["id"],
        },
        handler=_on_manager(read_artifact),
        spill=False,
    ),
]
