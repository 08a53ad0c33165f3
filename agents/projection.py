"""One projection of a run's events: each event folds, in one place, into
one typed view of the run (RunView) that every reader shares:

- the live stream and the page (live.streaming, agents.selectors.run_views):
  the run's status, its activity line, the answer and the lead's thinking as
  they stream, the open permission question;
- the steps, listed while the run works and in the Activity under a finished
  answer (agents.steps builds them: a step's words, its result read from the
  tool's output);
- the administrator's trace (agents.trace): a row per event, with the figures
  per agent and tool, the sources read, the permission answers and the errors,
  kept only by a view made with a Trace.

A new event type is an entry in agents.event_schema and one arm of
run_view_apply.
"""

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils.translation import gettext, gettext_noop, ngettext

from artifacts.models import ArtifactVersion
from library.models import LIBRARY_URL_PREFIX

from .config import LEAD_AGENT
from .models import Run, RunEvent
from .state import ALLOWING, PermissionDecision
from .steps import (
    AGENT,
    COMPACTION,
    DENIED,
    FAILED,
    OK,
    RESUMED,
    RETRY,
    STOPPED,
    THINKING,
    TOOL,
    Step,
    StepFold,
    Thinking,
    fold_clock_advance,
    fold_place,
    quoted,
    shortened,
    status_line,
    step_call_start,
    step_finish,
    step_outcome,
    step_result_read,
)
from .toolcalls import text_before_calls
from .tools.search import WEB_SEARCH
from .tools.web import WEB_FETCH, FetchTarget, fetch_target

# How much of a long text (a result, an answer, the params) a trace row shows.
SUMMARY_CHARS = 300


@dataclass(frozen=True)
class RequestTarget:
    """What an HTTP tool's call would send, as its permission_request says
    (agents.tools.http.http_request_shown), for the person asked to approve it."""

    method: str
    # The whole URL, query included, as it will be requested.
    url: str
    # Its host as web_fetch's prompt shows one (fetch_target): as people read it, and in ASCII when spelt otherwise.
    host: FetchTarget
    # Why the call will be refused before any request, whoever approves it.
    refused: str


def _request_target(request) -> RequestTarget | None:
    if not isinstance(request, dict) or not request.get("url"):
        return None
    url = str(request["url"])
    return RequestTarget(
        method=str(request.get("method", "")), url=url, host=fetch_target(url), refused=str(request.get("refused", ""))
    )


@dataclass(frozen=True)
class PermissionQuestion:
    """An open permission request as its prompt shows it: who asks, for what,
    and every parameter whole, as (name, text) pairs — model-chosen names are
    data, never looked up as attributes in a template."""

    id: str
    tool: str
    agent: str
    # What the call would read or change, and the task the agent was given.
    subject: str
    why: str
    params: tuple[tuple[str, str], ...]
    # The parameters the request could not carry whole: (name, full length).
    cut: tuple[tuple[str, int], ...] = ()
    # Where a web_fetch call would go.
    target: FetchTarget | None = None
    # What an HTTP tool's call would send.
    request: RequestTarget | None = None

    @property
    def can_approve(self) -> bool:
        """Only a call shown whole may be approved (the answer's service refuses it too)."""
        return not self.cut

    @property
    def unshowable(self) -> str:
        lengths = gettext(" and its ").join(
            ngettext("%(name)s is %(length)s character long", "%(name)s is %(length)s characters long", length)
            % {"name": name, "length": f"{length:,}"}
            if isinstance(length, int)
            else gettext("%(name)s was cut") % {"name": name}
            for name, length in self.cut
        )
        return gettext(
            "This call cannot be approved: its %(lengths)s, too long to show here whole. Deny it and the agent is told why."
        ) % {"lengths": lengths}


def _permission_question(*, data: dict, agent: str, subject: str, why: str) -> PermissionQuestion:
    """The question of a permission_request event's data."""
    params = data.get("params") if isinstance(data.get("params"), dict) else {}
    cut = data.get("params_truncated") if isinstance(data.get("params_truncated"), dict) else {}
    tool = str(data.get("tool", ""))
    url = params.get("url")
    fetches_web = tool == WEB_FETCH and isinstance(url, str) and not url.strip().lower().startswith(LIBRARY_URL_PREFIX)
    return PermissionQuestion(
        id=str(data.get("id", "")),
        tool=tool,
        agent=agent,
        subject=subject,
        why=why,
        params=tuple((str(name), _shown(value)) for name, value in params.items()),
        cut=tuple((str(name), length) for name, length in cut.items()),
        target=fetch_target(url) if fetches_web else None,
        request=_request_target(data.get("request")),
    )


def _shown(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


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
    """What the administrator's trace page shows of a run (agents.trace)."""

    run: Run
    rows: list[TraceRow] = field(default_factory=list)
    # The first event's time: each row says how long after it came.
    started: datetime | None = None
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


@dataclass
class RunView:
    """A run as its readers see it, folded from its events (run_view_apply),
    or from its stored answer once it has ended (agents.selectors.run_views)."""

    status: str = Run.Status.QUEUED
    activity: str = field(default_factory=lambda: gettext("Queued"))
    text: str = ""
    error: str = ""
    model: str = ""
    # The lead model's label in the models file: the answer names it.
    model_label: str = ""
    demo: bool = False
    run_id: int | None = None
    # Tried again as a new branch (runs.run_retry): the run its message keeps.
    retried: bool = False
    # The open permission request.
    pending: PermissionQuestion | None = None
    # The last event folded in.
    seq: int = 0
    fold: StepFold = field(default_factory=StepFold)
    # The administrator's trace, kept by a view made with one (agents.trace).
    trace: Trace | None = None
    # The lead's thinking in its current model call (for a finished run, the
    # last call's, which wrote the answer): when it began to stream, whether
    # the call has ended, and how long the model thought once known.
    thinking: str = ""
    thinking_from: datetime | None = None
    thinking_ended: bool = False
    thinking_ms: int | None = None

    @property
    def thinking_block(self) -> Thinking | None:
        """The thinking folded in the answer: open while the model thinks,
        closed once it answers or the call ends."""
        if not self.thinking.strip():
            return None
        live = self.is_active and not self.thinking_ended and not self.text
        return Thinking(self.thinking, live=live, ms=self.thinking_ms)

    def thinking_forget(self) -> None:
        """A new model call of the lead's (or the same asked again) thinks afresh."""
        self.thinking, self.thinking_from, self.thinking_ended, self.thinking_ms = "", None, False, None

    @property
    def steps(self) -> list[Step]:
        return self.fold.steps

    @property
    def is_active(self):
        return self.status in Run.ACTIVE_STATUSES

    @property
    def can_retry(self):
        return self.run_id is not None and not self.retried and self.status in (Run.Status.FAILED, Run.Status.CANCELLED)

    @property
    def question(self) -> PermissionQuestion | None:
        """The permission request to show: the open one while the run row
        says the run waits for an answer. One answered is not asked again,
        though the worker logs the answer only when it takes the run up again."""
        return self.pending if self.status == Run.Status.WAITING_PERMISSION else None


def run_view_chunk(view: RunView, *, agent: str, content: str, reasoning: str, at: datetime | None) -> None:
    """Streamed text, from an llm_chunk row or sent live before its row
    (live.streaming): the lead's shows as the answer and its thinking."""
    if agent != LEAD_AGENT:
        return
    # Thinking and answer first seen together (a page that opened or reloaded
    # after both began) say nothing of how long the model thought: the
    # duration waits for the call's end, which the engine measured.
    seen_thinking = view.thinking_from is not None
    if reasoning:
        view.thinking += reasoning
        view.thinking_from = view.thinking_from or at
    if content:
        if view.thinking_ms is None and seen_thinking and at:
            view.thinking_ms = int((at - view.thinking_from).total_seconds() * 1000)
        view.text += content
        view.activity = gettext("%(agent)s · writing the answer") % {"agent": LEAD_AGENT}


def run_view_apply(view: RunView, event: RunEvent) -> None:
    """Folds one event into the view: its steps, its live state and, when the
    view keeps a trace, the event's row there. Each arm does all three for its
    event type; a trace's words are made only for a view that keeps one."""
    fold, data, agent = view.fold, event.data, event.agent
    view.seq = event.seq
    fold_clock_advance(fold, event)
    trace = view.trace
    row = _trace_row(trace, event)
    # Whether the steps changed: a page sent them after this event has them.
    steps_changed = True
    match event.type:
        case RunEvent.Type.METADATA:
            if "ahead" in data:
                steps_changed = False
                view.activity = queue_place(data["ahead"])
            elif data.get("admitted"):
                steps_changed = False
                view.activity = gettext("Queued")
            elif data.get("resumed"):
                _steps_resume(fold)
                # The step the dead worker was in is done again from the start.
                view.text = ""
                view.thinking_forget()
                view.activity = gettext("Resuming")
            else:
                steps_changed = False
                view.status = Run.Status.RUNNING
                view.model, view.model_label = data.get("model", ""), data.get("model_label", "")
                view.demo = bool(data.get("demo"))
                view.activity = gettext("Starting")
            if trace is not None:
                _trace_start(trace, row, data)
        case RunEvent.Type.AGENT_START:
            instruction = str(data.get("instruction", ""))
            if agent == LEAD_AGENT:
                steps_changed = False
                view.activity = gettext("%(agent)s · thinking") % {"agent": LEAD_AGENT}
                view.text = ""
                view.thinking_forget()
            else:
                by = str(data.get("from") or LEAD_AGENT)
                step = fold.running.get(by)
                if step is None or step.kind != AGENT or step.agent != agent:
                    # A hand-over with no call logged before it still gets a step.
                    step = Step(AGENT, agent, by=by, started=fold.work)
                    fold_place(fold, by).append(step)
                step.subject, step.detail = quoted(instruction), instruction
                fold.groups[agent] = step
                view.activity = gettext("%(agent)s · working on %(instruction)s") % {
                    "agent": agent,
                    "instruction": quoted(instruction),
                }
            if row is not None:
                row.summary = (
                    f"asked{' by ' + data['from'] if data.get('from') else ''}: {_short(data.get('instruction'))}"
                )
        case RunEvent.Type.AGENT_COMPLETE:
            if agent == LEAD_AGENT:
                steps_changed = False
            else:
                step = fold.groups.pop(agent, None)
                if step is not None:
                    # The whole report; the lead's tool result holds it cut.
                    step.body = str(data.get("response", ""))
                view.activity = gettext("%(lead)s · reading %(agent)s’s report") % {"lead": LEAD_AGENT, "agent": agent}
            if row is not None:
                row.summary = f"answered: {_short(_answer(event, 'response'))}"
        case RunEvent.Type.LLM_CHUNK:
            steps_changed = False
            content, reasoning = data.get("content", ""), data.get("reasoning", "")
            run_view_chunk(view, agent=agent, content=content, reasoning=reasoning, at=event.created_at)
        case RunEvent.Type.LLM_COMPLETE:
            steps_changed = False
            if fold.thinking_steps:
                _step_thinking_add(fold, event)
            if agent == LEAD_AGENT:
                view.text = text_before_calls(data.get("content", view.text))
                # The whole of the call's thinking, and how long it took as the engine measured it.
                view.thinking = data.get("reasoning", view.thinking)
                view.thinking_ms = data.get("reasoning_ms", view.thinking_ms)
                view.thinking_ended = True
            if trace is not None:
                _trace_model_call(trace, row, event)
        case RunEvent.Type.LLM_RETRY:
            retry = Step(
                RETRY, agent, subject=gettext("the model's reply broke off; asked again"), status=OK, started=fold.work
            )
            retry.text = str(data.get("reason", ""))
            fold_place(fold, agent).append(retry)
            # The stream broke off and the model is asked again from the start.
            if agent == LEAD_AGENT:
                view.text = ""
                view.thinking_forget()
            view.activity = gettext("%(agent)s · reconnecting to the model") % {"agent": agent}
            if row is not None:
                row.summary, row.failed = f"model call asked again: {_short(data.get('reason'))}", True
        case RunEvent.Type.COMPACTION_START:
            # Between the agent's calls, so the step is its one in progress until the summary comes.
            step = Step(COMPACTION, agent, subject=gettext("summarising its context to make room"), started=fold.work)
            fold_place(fold, agent).append(step)
            fold.running[agent] = step
            view.activity = gettext("%(agent)s · summarising its context to make room") % {"agent": agent}
            if row is not None:
                row.summary = f"summarising the context, {data.get('tokens_before')} tokens"
        case RunEvent.Type.COMPACTION:
            _step_compaction(fold, agent, data)
            view.activity = gettext("%(agent)s · thinking") % {"agent": agent}
            if row is not None:
                sizes = f"{data.get('tokens_before')} → {data.get('tokens_after')} tokens"
                if data.get("failure"):
                    row.summary, row.failed = f"context cut, not summarised ({_short(data['failure'])}), {sizes}", True
                else:
                    row.summary = f"context summarised, {sizes}"
        case RunEvent.Type.TOOL_START:
            step = fold.running.get(agent)
            # A call that needed approval has had its step since it asked;
            # its tool_start follows the approval.
            if step is None or step.tool != data.get("tool") or step.permission not in ALLOWING:
                step_call_start(fold, agent, data)
            # What the agent wrote before a tool call was a step, not the answer;
            # its thinking is in the activity.
            if agent == LEAD_AGENT:
                view.text = ""
                view.thinking_forget()
            view.activity = status_line(fold.running.get(agent), fold, agent)
            if trace is not None:
                row.summary = f"{data.get('tool')}({_short(_call_text(data.get('params') or {}), 200)})"
                row.detail = _json(data.get("params") or {})
                _source_note(trace, data)
        case RunEvent.Type.TOOL_COMPLETE:
            step = fold.running.pop(agent, None)
            if step is None:
                # A call the engine could not parse never started; it fails on its own.
                step = Step(TOOL, agent, tool=str(data.get("tool", "")), started=fold.work)
                fold.tool_calls += 1
                fold_place(fold, agent).append(step)
            step_result_read(fold, step, data)
            if step.permission in (PermissionDecision.DENY, PermissionDecision.EXPIRED):
                step_finish(fold, step, DENIED)
            else:
                step_finish(fold, step, OK if data.get("success") else FAILED, outcome=step_outcome(step, data))
            view.activity = gettext("%(agent)s · thinking") % {"agent": agent}
            if trace is not None:
                _trace_tool_result(trace, row, data)
        case RunEvent.Type.PERMISSION_REQUEST:
            step = fold.running.get(agent)
            # A log written when tool_start came before the question has the call's step already.
            if step is None or step.tool != data.get("tool"):
                step = step_call_start(fold, agent, data)
            step.permission = "asked"
            fold.asking = step
            # No tool_start precedes a call that needs approval: the question ends the step's prose.
            if agent == LEAD_AGENT:
                view.text = ""
                view.thinking_forget()
            view.status = Run.Status.WAITING_PERMISSION
            # The question in the user's terms: who asks, for what, and the work it was given.
            group = fold.groups.get(agent)
            why = group.detail.strip().splitlines()[0] if group is not None and group.detail.strip() else ""
            view.pending = _permission_question(data=data, agent=agent, subject=step.subject, why=shortened(why, 300))
            view.activity = gettext("Waiting for your approval")
            if trace is not None:
                _trace_question(trace, row, event)
        case RunEvent.Type.PERMISSION_RESULT:
            step, fold.asking = fold.asking, None
            if step is None:
                steps_changed = False
            else:
                step.permission = str(data.get("decision", ""))
            view.pending = None
            if data.get("decision") in ALLOWING:
                view.activity = status_line(fold.running.get(agent), fold, agent)
            else:
                view.activity = gettext("%(agent)s · thinking") % {"agent": agent}
            if trace is not None:
                _trace_decision(trace, row, event)
        case RunEvent.Type.COMPLETE | RunEvent.Type.ERROR:
            _steps_end(fold, data)
            view.activity = ""
            if event.type == RunEvent.Type.COMPLETE:
                view.status = Run.Status.COMPLETED
                view.text = data.get("response", view.text)
            elif data.get("cancelled"):
                view.status = Run.Status.CANCELLED
            else:
                view.status = Run.Status.FAILED
                view.error = stored_text(data.get("message") or gettext_noop("The turn failed."))
            if trace is not None:
                _trace_end(trace, row, event)
        case _:
            steps_changed = False
            if row is not None:
                row.summary = _short(_json(data))
    if steps_changed:
        fold.changed_seq = event.seq


def _steps_resume(fold: StepFold) -> None:
    """The worker died and the step it was in starts again, tool call
    included; a subagent's work goes on under its hand-over."""
    for open_agent, step in list(fold.running.items()):
        if step.kind != AGENT:
            step_finish(fold, step, STOPPED, outcome=gettext("interrupted, done again"))
            del fold.running[open_agent]
    # Among the steps of the agent that was at work: the newest hand-over's, else the lead's.
    fold_place(fold, next(reversed(fold.groups), LEAD_AGENT)).append(
        Step(
            RESUMED,
            "",
            subject=gettext("the worker stopped; the run went on where it was"),
            status=OK,
            started=fold.work,
        )
    )


def _step_compaction(fold: StepFold, agent: str, data: dict) -> None:
    step = fold.running.get(agent)
    if step is None or step.kind != COMPACTION:
        # Logged before compactions announced their start.
        step = Step(COMPACTION, agent, started=fold.work)
        fold_place(fold, agent).append(step)
    fold.running.pop(agent, None)
    before, after = data.get("tokens_before"), data.get("tokens_after")
    sizes = (
        {"before": f"{before:,}", "after": f"{after:,}"} if isinstance(before, int) and isinstance(after, int) else None
    )
    if data.get("failure"):
        step.subject = (
            gettext("could not summarise its context, so cut it: %(before)s → %(after)s tokens (estimated)") % sizes
            if sizes
            else gettext("could not summarise its context, so cut it")
        )
        step.text = str(data["failure"])
    else:
        step.subject = (
            gettext("summarised its context to make room: %(before)s → %(after)s tokens (estimated)") % sizes
            if sizes
            else gettext("summarised its context to make room")
        )
        step.body = str(data.get("summary", ""))
    step_finish(fold, step, OK)


def _step_thinking_add(fold: StepFold, event: RunEvent) -> None:
    """The thinking of an llm_complete event, as a step of the agent that
    thought, for the activity (the live list of steps has none)."""
    reasoning = event.data.get("reasoning")
    if not isinstance(reasoning, str) or not reasoning.strip():
        return
    ms = event.data.get("reasoning_ms")
    thinking = Thinking(reasoning, ms=ms if isinstance(ms, int) else None)
    fold_place(fold, event.agent).append(
        Step(THINKING, event.agent, subject=thinking.summary, status=OK, started=fold.work, thinking=thinking)
    )


def _steps_end(fold: StepFold, data: dict) -> None:
    """The run ended: what its end failed to save, and every step still open stops."""
    flush = data.get("artifacts")
    if isinstance(flush, dict) and isinstance(flush.get("failed"), dict):
        fold.unsaved = set(flush["failed"])
    if fold.asking is not None:
        fold.asking.permission, fold.asking = "unanswered", None
    for step in fold.running.values():
        step_finish(fold, step, STOPPED)
    fold.running.clear()
    fold.groups.clear()


# --- the trace's rows and figures -------------------------------------------------------


def _trace_row(trace: Trace | None, event: RunEvent) -> TraceRow | None:
    """The event's row in the trace, if the view keeps one."""
    if trace is None:
        return None
    trace.started = trace.started or event.created_at
    row = TraceRow(at=event.created_at - trace.started, seq=event.seq, type=event.type, agent=event.agent, summary="")
    trace.rows.append(row)
    return row


def _trace_start(trace: Trace, row: TraceRow, data: dict) -> None:
    model = data.get("model", "")
    if model and model not in trace.models:
        trace.models.append(model)
    if "ahead" in data:
        row.summary = f"waiting for a slot, {data['ahead']} of the user's turns ahead"
    elif data.get("admitted"):
        row.summary = "admitted: queued for a worker"
    elif data.get("resumed"):
        row.summary = "resumed after its worker died"
    else:
        label = f" ({data['model_label']})" if data.get("model_label") else ""
        row.summary = f"started with model {model}{label}"


def _trace_model_call(trace: Trace, row: TraceRow, event: RunEvent) -> None:
    data = event.data
    usage = data.get("token_usage") or {}
    figures = trace.agent_figures[event.agent]
    figures.calls += 1
    figures.prompt_tokens += usage.get("prompt_tokens") or 0
    figures.completion_tokens += usage.get("completion_tokens") or 0
    figures.duration_ms += data.get("duration_ms") or 0
    tokens = (
        f"{usage.get('prompt_tokens', '?')} in, {usage.get('completion_tokens', '?')} out" if usage else "no usage sent"
    )
    row.summary = f"model call, {tokens}, {data.get('duration_ms', '?')} ms: {_short(_answer(event, 'content'))}"


def _trace_tool_result(trace: Trace, row: TraceRow, data: dict) -> None:
    figures = trace.tool_figures[data.get("tool", "")]
    figures.calls += 1
    figures.duration_ms += data.get("duration_ms") or 0
    row.failed = not data.get("success", True)
    figures.failures += row.failed
    outcome = "failed" if row.failed else "ok"
    row.summary = f"{data.get('tool')} {outcome}, {data.get('duration_ms', '?')} ms: {_result_short(data)}"
    row.detail = str(data.get("result", ""))


def _trace_decision(trace: Trace, row: TraceRow, event: RunEvent) -> None:
    data = event.data
    decision = next((d for d in reversed(trace.decisions) if not d.decision), None)
    if decision is None:
        decision = Decision(tool=data.get("tool", ""), agent=event.agent, asked_at=event.created_at)
        trace.decisions.append(decision)
    decision.decision = data.get("decision", "")
    decision.by = data.get("by", "")
    decision.decided_at = data.get("decided_at", "")
    row.summary = f"{data.get('tool')}: {decision.decision}{' by ' + decision.by if decision.by else ''}"


def _trace_question(trace: Trace, row: TraceRow, event: RunEvent) -> None:
    data = event.data
    trace.decisions.append(Decision(tool=data.get("tool", ""), agent=event.agent, asked_at=event.created_at))
    row.summary = f"asks permission for {data.get('tool')}({_short(_call_text(data.get('params') or {}), 200)})"
    if isinstance(request := data.get("request"), dict):
        row.summary += f": {request.get('method')} {_short(str(request.get('url', '')), 300)}"


def _trace_end(trace: Trace, row: TraceRow, event: RunEvent) -> None:
    data = event.data
    row.detail = _json(data.get("artifacts") or {})
    if event.type == RunEvent.Type.COMPLETE:
        row.summary = f"completed in {data.get('duration_ms', '?')} ms: {_short(_answer(event, 'response'))}"
        return
    row.failed = not data.get("cancelled")
    row.summary = ("cancelled: " if data.get("cancelled") else "") + _short(data.get("message"))
    trace.errors.append(data.get("message", ""))


def queue_place(ahead: int) -> str:
    """A waiting run's place among its user's waiting runs (admission)."""
    if not ahead:
        return gettext("Queued — next in line")
    return ngettext("Queued — %(count)s ahead of you", "Queued — %(count)s ahead of you", ahead) % {"count": ahead}


def stored_text(text: str) -> str:
    """A message the worker stored in English (a run's error), in the reader's
    language when it is one of the catalogue's, else as it was stored (a
    model's or a library's own words)."""
    return gettext(text) if text else ""


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
