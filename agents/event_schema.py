"""The declared shape of every run event's `data`, one TypedDict per type
(docs/events.md describes them field by field; a test keeps the two in step).

The shapes are what agents.engine and agents.services write. Production does
not check them on the way in: the tests validate every event their turns
write, which is where a change of shape must show up."""

from typing import Annotated, Literal, NotRequired

from pydantic import ConfigDict, Discriminator, Field, JsonValue, Tag, TypeAdapter, ValidationError, with_config

# Pydantic reads TypedDicts from typing only on Python 3.12 and later.
from typing_extensions import TypedDict

from .models import RunEvent

# A payload has exactly its declared keys: one the readers do not know about
# is a change of the vocabulary, to be declared and documented first.
_EXACT = ConfigDict(extra="forbid")


@with_config(_EXACT)
class MetadataStarted(TypedDict):
    """The first event of a run."""

    conversation_id: str
    message_id: int
    run_id: int
    model: str
    # The lead model's label in the models file; not for the environment's model.
    model_label: NotRequired[str]
    demo: bool


@with_config(_EXACT)
class MetadataResumed(TypedDict):
    """Written by the sweep when it queues again a run whose worker died."""

    run_id: int
    model: str
    resumed: Literal[True]


@with_config(_EXACT)
class MetadataWaiting(TypedDict):
    """Written by admission when the run waits for a slot, and when its place changes."""

    run_id: int
    # The user's waiting runs ahead of this one.
    ahead: int


@with_config(_EXACT)
class MetadataAdmitted(TypedDict):
    """Written by admission when a run that waited is queued for a worker."""

    run_id: int
    admitted: Literal[True]


def _metadata_kind(data) -> str:
    if not isinstance(data, dict):
        return "started"
    return next((key for key in ("resumed", "ahead", "admitted") if key in data), "started")


# Told apart by their keys, so that an error names the fields of the one it is.
Metadata = Annotated[
    Annotated[MetadataStarted, Tag("started")]
    | Annotated[MetadataResumed, Tag("resumed")]
    | Annotated[MetadataWaiting, Tag("ahead")]
    | Annotated[MetadataAdmitted, Tag("admitted")],
    Discriminator(_metadata_kind),
]


# `from` (a subagent's only: the agent that delegated) is a keyword, so the
# functional form gives the key its real name.
AgentStart = with_config(_EXACT)(TypedDict("AgentStart", {"instruction": str, "from": NotRequired[str]}))


@with_config(_EXACT)
class LlmChunk(TypedDict):
    content: str
    # The model's thinking streamed since the previous chunk row, when there is some.
    reasoning: NotRequired[str]


@with_config(_EXACT)
class LlmRetry(TypedDict):
    reason: str


@with_config(_EXACT)
class NativeToolCall(TypedDict):
    id: str
    name: str
    arguments: str  # JSON text, as the model streamed it


# The counts come as the server sent them (the SDK's usage object dumped):
# the three totals always, and whatever details the server adds.
@with_config(ConfigDict(extra="allow"))
class TokenUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@with_config(_EXACT)
class LlmComplete(TypedDict):
    # Absent from a lead's call once retention folded the run, when it was the
    # message's response (agents.services.retention): readers take that instead.
    content: NotRequired[str]
    reasoning: str
    tool_calls: list[NativeToolCall]
    token_usage: TokenUsage | None
    duration_ms: int
    # When the call had thinking: how long the model thought before it answered.
    reasoning_ms: NotRequired[int]


@with_config(_EXACT)
class CompactionStart(TypedDict):
    tokens_before: int


@with_config(_EXACT)
class Compaction(TypedDict):
    summary: str
    tokens_before: int
    tokens_after: int
    message_id: int
    # Why the model could not summarise, so the older context was cut instead.
    failure: NotRequired[str]


@with_config(_EXACT)
class AgentComplete(TypedDict):
    # As LlmComplete.content: a folded run's lead's answer is its message's.
    response: NotRequired[str]


@with_config(_EXACT)
class ToolStart(TypedDict):
    tool: str
    params: dict[str, JsonValue]
    params_truncated: NotRequired[dict[str, int]]


@with_config(_EXACT)
class ArtifactChange(TypedDict):
    artifact_id: str
    title: str
    version: int
    length: int
    removed: int
    added: int


@with_config(_EXACT)
class SourceData(TypedDict):
    """A page a tool found or read: what a citation of it needs."""

    title: str
    # The page's address, or library://<id> for a document of the team library.
    url: str
    # Its start, or the search's snippet, as plain text (SOURCE_EXCERPT_CHARS at most).
    excerpt: str
    # Where in it: a library passage's headings ("Heat pumps › Efficiency").
    section: NotRequired[str]
    # The page of a PDF a library passage starts on.
    page: NotRequired[int]
    # The id of the snapshot of a web page web_fetch read (library.models.WebSnapshot).
    snapshot: NotRequired[int]


@with_config(_EXACT)
class SourcesOutput(TypedDict):
    """web_search: what it found."""

    kind: Literal["sources"]
    sources: list[SourceData]
    # What the model was told instead, when nothing was found.
    message: NotRequired[str]


@with_config(_EXACT)
class PageOutput(TypedDict):
    """web_fetch: the page or library document it read."""

    kind: Literal["page"]
    source: SourceData


@with_config(_EXACT)
class ArtifactOutput(TypedDict):
    """An artifact tool: the artifact it wrote or read, and which version."""

    kind: Literal["artifact"]
    artifact_id: str
    title: str
    version: int


@with_config(_EXACT)
class ReportOutput(TypedDict):
    """call_subagent answered: the report is the subagent's agent_complete."""

    kind: Literal["report"]
    agent: str


@with_config(_EXACT)
class NoReportOutput(TypedDict):
    """call_subagent ended without a report: what the lead was told instead."""

    kind: Literal["no_report"]
    agent: str
    message: str


@with_config(_EXACT)
class ErrorOutput(TypedDict):
    """Any call that failed, run or not: what the model was told went wrong."""

    kind: Literal["error"]
    message: str


ToolOutput = Annotated[
    SourcesOutput | PageOutput | ArtifactOutput | ReportOutput | NoReportOutput | ErrorOutput,
    Field(discriminator="kind"),
]


@with_config(_EXACT)
class ToolComplete(TypedDict):
    tool: str
    success: bool
    result: str
    truncated: bool
    duration_ms: int
    # The result as data, which the page and the trace read rather than `result`;
    # absent from events written before tools returned it.
    output: NotRequired[ToolOutput]
    # What the tool and the engine told the model with the result.
    notes: NotRequired[list[str]]
    # What a tool's result adds (ToolResult.metadata), by tool:
    artifact_change: NotRequired[ArtifactChange]  # artifact tools that changed one
    stored_as: NotRequired[str]  # a result too long for the context
    url: NotRequired[str]  # web_fetch
    status: NotRequired[int]  # web_fetch of the web, an HTTP tool
    bytes: NotRequired[int]  # web_fetch of the web, an HTTP tool
    title: NotRequired[str]  # web_fetch of the library
    provider: NotRequired[str]  # web_search
    results: NotRequired[int]  # web_search


@with_config(_EXACT)
class RequestShown(TypedDict):
    """What an HTTP tool's call would send (agents.tools.http.http_request_shown)."""

    method: str
    url: str
    refused: NotRequired[str]


@with_config(_EXACT)
class PermissionRequest(TypedDict):
    id: str
    tool: str
    params: dict[str, JsonValue]
    params_truncated: NotRequired[dict[str, int]]
    expires_at: str
    request: NotRequired[RequestShown]


@with_config(_EXACT)
class PermissionResult(TypedDict):
    id: str
    tool: str
    decision: Literal["approve", "always", "deny", "expired"]
    by: str
    decided_at: str


@with_config(_EXACT)
class ArtifactsFlush(TypedDict):
    flushed: list[str]
    conflicts: list[str]
    # Saved without lines a person wrote there; absent from older events.
    dropped: NotRequired[list[str]]
    failed: dict[str, str]


@with_config(_EXACT)
class Complete(TypedDict):
    # As LlmComplete.content: a folded run's answer is its message's.
    response: NotRequired[str]
    duration_ms: int
    artifacts: ArtifactsFlush


@with_config(_EXACT)
class Error(TypedDict):
    message: str
    cancelled: NotRequired[Literal[True]]
    artifacts: ArtifactsFlush


EVENT_SCHEMAS: dict[str, object] = {
    RunEvent.Type.METADATA: Metadata,
    RunEvent.Type.AGENT_START: AgentStart,
    RunEvent.Type.LLM_CHUNK: LlmChunk,
    RunEvent.Type.LLM_RETRY: LlmRetry,
    RunEvent.Type.LLM_COMPLETE: LlmComplete,
    RunEvent.Type.COMPACTION_START: CompactionStart,
    RunEvent.Type.COMPACTION: Compaction,
    RunEvent.Type.AGENT_COMPLETE: AgentComplete,
    RunEvent.Type.TOOL_START: ToolStart,
    RunEvent.Type.TOOL_COMPLETE: ToolComplete,
    RunEvent.Type.PERMISSION_REQUEST: PermissionRequest,
    RunEvent.Type.PERMISSION_RESULT: PermissionResult,
    RunEvent.Type.COMPLETE: Complete,
    RunEvent.Type.ERROR: Error,
}

_ADAPTERS = {type: TypeAdapter(schema) for type, schema in EVENT_SCHEMAS.items()}


class EventSchemaError(ValueError):
    pass


def event_validate(*, type: str, data: dict) -> None:
    """Raise EventSchemaError unless `data` is exactly the declared payload of
    an event of `type`. Strict: JSON that reads back as another type (a
    number as text, a 1 for true) is wrong too."""
    adapter = _ADAPTERS.get(type)
    if adapter is None:
        raise EventSchemaError(f"Unknown event type {type!r}; known: {', '.join(EVENT_SCHEMAS)}")
    try:
        adapter.validate_python(data, strict=True)
    except ValidationError as error:
        problems = "; ".join(_problem(problem) for problem in error.errors(include_url=False))
        raise EventSchemaError(f"Invalid {type} event: {problems}") from None


def _problem(problem) -> str:
    field = ".".join(str(part) for part in problem["loc"]) or "(the payload)"
    given = "" if problem["type"] == "missing" else f" (got {repr(problem['input'])[:80]})"
    return f"{field}: {problem['msg']}{given}"
