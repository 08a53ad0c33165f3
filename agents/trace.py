"""What a run did, for the administrator's trace page (agents.admin): every
event but the streamed text, in order, with the figures per agent and tool,
the sources the agents read, the permission answers and the artifact versions
the run saved. Two queries whatever the run's length: its events without the
chunks, and its versions."""

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from artifacts.models import ArtifactVersion

from .models import Run, RunEvent
from .tools.search import WEB_SEARCH
from .tools.web import WEB_FETCH

# How much of a long text (a result, an answer, the params) a timeline row shows.
SUMMARY_CHARS = 300


@dataclass
class TraceRow:
    at: timedelta
    seq: int
    type: str
    agent: str
    summary: str
    # Formatted JSON of the params or the whole data, for a folded detail.
    detail: str = ""
    failed: bool = False

    @property
    def at_text(self) -> str:
        return f"+{self.at.total_seconds():.3f} s"


@dataclass
class Figures:
    """Calls, tokens and time of one agent's model calls or one tool's runs."""

    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Decision:
    tool: str
    agent: str
    asked_at: datetime
    decision: str = ""
    by: str = ""
    decided_at: str = ""


@dataclass
class Trace:
    run: Run
    rows: list[TraceRow] = field(default_factory=list)
    # The figures per agent and per tool, summed while the events are folded.
    # Templates read `agents` and `tools` instead: the names are the model's,
    # and a template's `.items` on a dict is a lookup of the key "items" first.
    agent_figures: dict[str, Figures] = field(default_factory=lambda: defaultdict(Figures))
    tool_figures: dict[str, Figures] = field(default_factory=lambda: defaultdict(Figures))
    models: list[str] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)  # (tool, url or query)
    decisions: list[Decision] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    versions: list[ArtifactVersion] = field(default_factory=list)

    @property
    def agents(self) -> list[tuple[str, Figures]]:
        """(agent, figures) pairs in the order the agents first called their model."""
        return list(self.agent_figures.items())

    @property
    def tools(self) -> list[tuple[str, Figures]]:
        """(tool, figures) pairs in the order the tools first answered."""
        return list(self.tool_figures.items())

    @property
    def total_tokens(self) -> int:
        return sum(figures.total_tokens for figures in self.agent_figures.values())


def _short(text, limit: int = SUMMARY_CHARS) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def run_trace(*, run: Run) -> Trace:
    trace = Trace(run=run)
    if run.model:
        trace.models.append(run.model)
    events = run.events.exclude(type=RunEvent.Type.LLM_CHUNK).order_by("seq")
    start = None
    for event in events.iterator():
        start = start or event.created_at
        row = TraceRow(at=event.created_at - start, seq=event.seq, type=event.type, agent=event.agent, summary="")
        _event_fold(trace, row, event)
        trace.rows.append(row)
    trace.versions = list(
        ArtifactVersion.objects.filter(run=run)
        .select_related("artifact")
        .defer("content", "artifact__content")
        .order_by("created_at", "pk")
    )
    if run.error and run.error not in trace.errors:
        trace.errors.append(run.error)
    # Plain dicts: a lookup that misses is not a new agent or tool.
    trace.agent_figures, trace.tool_figures = dict(trace.agent_figures), dict(trace.tool_figures)
    return trace


def _event_fold(trace: Trace, row: TraceRow, event: RunEvent) -> None:
    data, agent = event.data, event.agent
    match event.type:
        case RunEvent.Type.METADATA:
            model = data.get("model", "")
            if model and model not in trace.models:
                trace.models.append(model)
            label = f" ({data['model_label']})" if data.get("model_label") else ""
            if "ahead" in data:
                row.summary = f"waiting for a slot, {data['ahead']} of the user's turns ahead"
            elif data.get("admitted"):
                row.summary = "admitted: queued for a worker"
            else:
                row.summary = (
                    "resumed after its worker died" if data.get("resumed") else f"started with model {model}{label}"
                )
        case RunEvent.Type.AGENT_START:
            row.summary = f"asked{' by ' + data['from'] if data.get('from') else ''}: {_short(data.get('instruction'))}"
        case RunEvent.Type.AGENT_COMPLETE:
            row.summary = f"answered: {_short(_answer(event, 'response'))}"
        case RunEvent.Type.LLM_COMPLETE:
            usage = data.get("token_usage") or {}
            figures = trace.agent_figures[agent]
            figures.calls += 1
            figures.prompt_tokens += usage.get("prompt_tokens") or 0
            figures.completion_tokens += usage.get("completion_tokens") or 0
            figures.duration_ms += data.get("duration_ms") or 0
            tokens = (
                f"{usage.get('prompt_tokens', '?')} in, {usage.get('completion_tokens', '?')} out"
                if usage
                else "no usage sent"
            )
            row.summary = (
                f"model call, {tokens}, {data.get('duration_ms', '?')} ms: {_short(_answer(event, 'content'))}"
            )
        case RunEvent.Type.LLM_RETRY:
            row.summary = f"model call asked again: {_short(data.get('reason'))}"
            row.failed = True
        case RunEvent.Type.COMPACTION_START:
            row.summary = f"summarising the context, {data.get('tokens_before')} tokens"
        case RunEvent.Type.COMPACTION if data.get("failure"):
            row.summary = (
                f"context cut, not summarised ({_short(data['failure'])}), "
                f"{data.get('tokens_before')} → {data.get('tokens_after')} tokens"
            )
            row.failed = True
        case RunEvent.Type.COMPACTION:
            row.summary = f"context summarised, {data.get('tokens_before')} → {data.get('tokens_after')} tokens"
        case RunEvent.Type.TOOL_START:
            row.summary = f"{data.get('tool')}({_short(_call_text(data.get('params') or {}), 200)})"
            row.detail = _json(data.get("params") or {})
            _source_note(trace, data)
        case RunEvent.Type.TOOL_COMPLETE:
            figures = trace.tool_figures[data.get("tool", "")]
            figures.calls += 1
            figures.duration_ms += data.get("duration_ms") or 0
            row.failed = not data.get("success", True)
            figures.failures += row.failed
            outcome = "failed" if row.failed else "ok"
            row.summary = f"{data.get('tool')} {outcome}, {data.get('duration_ms', '?')} ms: {_result_short(data)}"
            row.detail = str(data.get("result", ""))
        case RunEvent.Type.PERMISSION_REQUEST:
            trace.decisions.append(Decision(tool=data.get("tool", ""), agent=agent, asked_at=event.created_at))
            row.summary = f"asks permission for {data.get('tool')}({_short(_call_text(data.get('params') or {}), 200)})"
            if isinstance(request := data.get("request"), dict):
                row.summary += f": {request.get('method')} {_short(str(request.get('url', '')), 300)}"
        case RunEvent.Type.PERMISSION_RESULT:
            decision = next((d for d in reversed(trace.decisions) if not d.decision), None)
            if decision is None:
                decision = Decision(tool=data.get("tool", ""), agent=agent, asked_at=event.created_at)
                trace.decisions.append(decision)
            decision.decision = data.get("decision", "")
            decision.by = data.get("by", "")
            decision.decided_at = data.get("decided_at", "")
            row.summary = f"{data.get('tool')}: {decision.decision}{' by ' + decision.by if decision.by else ''}"
        case RunEvent.Type.COMPLETE:
            row.summary = f"completed in {data.get('duration_ms', '?')} ms: {_short(_answer(event, 'response'))}"
            row.detail = _json(data.get("artifacts") or {})
        case RunEvent.Type.ERROR:
            row.failed = not data.get("cancelled")
            row.summary = ("cancelled: " if data.get("cancelled") else "") + _short(data.get("message"))
            row.detail = _json(data.get("artifacts") or {})
            trace.errors.append(data.get("message", ""))
        case _:
            row.summary = _short(_json(data))


def _answer(event: RunEvent, field: str) -> str:
    """The text an event carried; retention stores the answer once, in the
    message, and removes it from the events that repeated it."""
    return event.data[field] if field in event.data else event.run.message.response


def _result_short(data: dict) -> str:
    """A tool's result in a line, from its output (agents.event_schema.ToolOutput);
    an event from before tools returned one by the start of what the model was told."""
    output = data.get("output")
    if not isinstance(output, dict):
        return _short(data.get("result"))
    match output.get("kind"):
        case "sources" if output.get("sources"):
            found = "; ".join(f"{source.get('title')} <{source.get('url')}>" for source in output["sources"])
            return _short(f"{len(output['sources'])} found: {found}")
        case "page":
            source = output.get("source") or {}
            return _short(f"{source.get('title')} <{source.get('url')}>: {source.get('excerpt')}")
        case "artifact":
            return f"{output.get('artifact_id')} v{output.get('version')} ({_short(output.get('title'), 100)})"
        case "report":
            return f"{output.get('agent')} reported back"
        case _:
            return _short(output.get("message"))


def _call_text(params: dict) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in params.items())


def _source_note(trace: Trace, data: dict) -> None:
    params = data.get("params") or {}
    if data.get("tool") == WEB_FETCH and params.get("url"):
        trace.sources.append((WEB_FETCH, str(params["url"])))
    elif data.get("tool") == WEB_SEARCH and params.get("query"):
        trace.sources.append((WEB_SEARCH, str(params["query"])))
