"""What a run has done so far, folded from its event log.

The page and the websocket consumer render runs from the same fold, so a view
rebuilt after a reload or a dropped message is the view that streamed. Its
steps are agents.steps's fold, which the activity under a finished answer
shows too.

Also the reads about runs that the pages and a run's start share: a user's
run, a conversation's active one, the tools always allowed on a branch.
"""

import json
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db.models import F, OuterRef, Q, Subquery
from django.utils.translation import gettext, gettext_noop, ngettext

from artifactflow.textsearch import CJK_CHARACTER
from artifacts.branches import Branch, branch_at, branch_shown
from artifacts.live import ActiveRun
from artifacts.models import ArtifactSession
from artifacts.selectors import run_versions
from conversations.selectors import readable_filter
from conversations.tree import message_path

from .config import LEAD_AGENT
from .library import library_documents
from .llm.config import lead_choices_from_settings
from .models import LIBRARY_URL_PREFIX, Run, RunEvent
from .state import ALLOWING
from .steps import (
    ArtifactRef,
    Step,
    StepFold,
    Thinking,
    quoted,
    shortened,
    status_line,
    step_fold_apply,
    step_thinking_add,
)
from .toolcalls import text_before_calls
from .tools.web import WEB_FETCH, FetchTarget, fetch_target

# Message metadata key: tools the user always allows on the branch through it.
ALLOWED_TOOLS = "allowed_tools"
# A library of thousands is not sorted for six examples.
LIBRARY_TITLES_SCANNED = 200


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
class RunView:
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
    # A finished answer rendered when it was stored (Message.response_html).
    html: str = ""
    fold: StepFold = field(default_factory=StepFold)
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


def run_get(*, user, run_id: int) -> Run | None:
    """The run with this id if it answers a message of the user's, else None."""
    return (
        Run.objects.select_related("message__conversation").filter(pk=run_id, message__conversation__owner=user).first()
    )


def run_viewable(*, user, run_id: int) -> Run | None:
    """The run with this id if it answers a message of a conversation the
    user may read (their own or shared with them), else None. Only for
    reading: acting on a run goes through run_get."""
    readable = readable_filter(user=user, via="message__conversation__")
    return Run.objects.select_related("message__conversation").filter(readable, pk=run_id).first()


def run_view_chunk(view: RunView, *, agent: str, content: str, reasoning: str, at: datetime | None) -> None:
    """Streamed text, from an llm_chunk row or sent live before its row
    (live.streaming): the lead's shows as the answer and its thinking."""
    if agent != LEAD_AGENT:
        return
    if reasoning:
        view.thinking += reasoning
        view.thinking_from = view.thinking_from or at
    if content:
        if view.thinking_ms is None and view.thinking_from and at:
            view.thinking_ms = int((at - view.thinking_from).total_seconds() * 1000)
        view.text += content
        view.activity = gettext("%(agent)s · writing the answer") % {"agent": LEAD_AGENT}


def run_view_apply(view: RunView, event: RunEvent) -> None:
    data = event.data
    agent = event.agent
    view.seq = event.seq
    step_fold_apply(view.fold, event)
    match event.type:
        case RunEvent.Type.METADATA if "ahead" in data:
            view.activity = queue_place(data["ahead"])
        case RunEvent.Type.METADATA if data.get("admitted"):
            view.activity = gettext("Queued")
        case RunEvent.Type.METADATA if data.get("resumed"):
            # The step the dead worker was in is done again from the start.
            view.text = ""
            view.thinking_forget()
            view.activity = gettext("Resuming")
        case RunEvent.Type.METADATA:
            view.status = Run.Status.RUNNING
            view.model = data.get("model", "")
            view.model_label = data.get("model_label", "")
            view.demo = bool(data.get("demo"))
            view.activity = gettext("Starting")
        case RunEvent.Type.AGENT_START if agent == LEAD_AGENT:
            view.activity = gettext("%(agent)s · thinking") % {"agent": LEAD_AGENT}
            view.text = ""
            view.thinking_forget()
        case RunEvent.Type.AGENT_START:
            view.activity = gettext("%(agent)s · working on %(instruction)s") % {
                "agent": agent,
                "instruction": quoted(data.get("instruction", "")),
            }
        case RunEvent.Type.AGENT_COMPLETE if agent != LEAD_AGENT:
            view.activity = gettext("%(lead)s · reading %(agent)s’s report") % {"lead": LEAD_AGENT, "agent": agent}
        case RunEvent.Type.LLM_CHUNK:
            run_view_chunk(
                view,
                agent=agent,
                content=data.get("content", ""),
                reasoning=data.get("reasoning", ""),
                at=event.created_at,
            )
        case RunEvent.Type.LLM_RETRY:
            # The stream broke off and the model is asked again from the start.
            if agent == LEAD_AGENT:
                view.text = ""
                view.thinking_forget()
            view.activity = gettext("%(agent)s · reconnecting to the model") % {"agent": agent}
        case RunEvent.Type.COMPACTION_START:
            view.activity = gettext("%(agent)s · summarising its context to make room") % {"agent": agent}
        case RunEvent.Type.COMPACTION:
            view.activity = gettext("%(agent)s · thinking") % {"agent": agent}
        case RunEvent.Type.LLM_COMPLETE if agent == LEAD_AGENT:
            view.text = text_before_calls(data.get("content", view.text))
            # The whole of the call's thinking, and how long it took as the engine measured it.
            view.thinking = data.get("reasoning", view.thinking)
            view.thinking_ms = data.get("reasoning_ms", view.thinking_ms)
            view.thinking_ended = True
        case RunEvent.Type.TOOL_START:
            # What the agent wrote before a tool call was a step, not the answer;
            # its thinking is in the activity.
            if agent == LEAD_AGENT:
                view.text = ""
                view.thinking_forget()
            view.activity = status_line(view.fold.running.get(agent), view.fold, agent)
        case RunEvent.Type.TOOL_COMPLETE:
            view.activity = gettext("%(agent)s · thinking") % {"agent": agent}
        case RunEvent.Type.PERMISSION_REQUEST:
            # No tool_start precedes a call that needs approval: the question ends the step's prose.
            if agent == LEAD_AGENT:
                view.text = ""
                view.thinking_forget()
            view.status = Run.Status.WAITING_PERMISSION
            # The question in the user's terms: who asks, for what, and the
            # work it was given, from the step the fold keeps for the call.
            step, group = view.fold.running.get(agent), view.fold.groups.get(agent)
            why = group.detail.strip().splitlines()[0] if group is not None and group.detail.strip() else ""
            view.pending = _permission_question(
                data=data, agent=agent, subject=step.subject if step else "", why=shortened(why, 300)
            )
            view.activity = gettext("Waiting for your approval")
        case RunEvent.Type.PERMISSION_RESULT if data.get("decision") in ALLOWING:
            view.pending = None
            view.activity = status_line(view.fold.running.get(agent), view.fold, agent)
        case RunEvent.Type.PERMISSION_RESULT:
            view.pending = None
            view.activity = gettext("%(agent)s · thinking") % {"agent": agent}
        case RunEvent.Type.COMPLETE:
            view.status = Run.Status.COMPLETED
            view.text = data.get("response", view.text)
            view.activity = ""
        case RunEvent.Type.ERROR if data.get("cancelled"):
            view.status = Run.Status.CANCELLED
            view.activity = ""
        case RunEvent.Type.ERROR:
            view.status = Run.Status.FAILED
            view.error = stored_text(data.get("message") or gettext_noop("The turn failed."))
            view.activity = ""


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


def run_views(*, runs: list[Run]) -> dict[int, RunView]:
    """A view of each run, reading the events of the unfinished ones in one query."""
    views = {}
    active = {run.pk: run for run in runs if run.is_active}
    for run in runs:
        if run.is_active:
            views[run.pk] = RunView(status=run.status, model=run.model, model_label=run.model_label, run_id=run.pk)
        else:
            views[run.pk] = RunView(
                status=run.status,
                activity="",
                text=run.message.response,
                html=run.message.response_html,
                error=stored_text(run.error),
                model=run.model,
                model_label=run.model_label,
                demo=run.model == "demo",
                run_id=run.pk,
                # Annotated by the thread; a run read alone is offered a retry its service may refuse.
                retried=getattr(run, "retried", False),
            )
    for event in RunEvent.objects.filter(run_id__in=active).order_by("run_id", "seq"):
        run_view_apply(views[event.run_id], event)
    _thinking_find(views=[views[run.pk] for run in runs if run.status == Run.Status.COMPLETED])
    for pk, run in active.items():
        # The run row is the authority on status; events only fill in progress.
        views[pk].status = run.status
    return views


def _thinking_find(*, views: list[RunView]) -> None:
    """The thinking of each completed run's last lead model call (the one
    that wrote its answer), in one query: its streamed chunks may be purged,
    its llm_complete events are kept. A run that failed or was stopped may
    have ended in another call than its last logged one."""
    by_run = {view.run_id: view for view in views if view.run_id is not None}
    if not by_run:
        return
    lead_calls = RunEvent.objects.filter(type=RunEvent.Type.LLM_COMPLETE, agent=LEAD_AGENT)
    last = lead_calls.filter(run_id=OuterRef("run_id")).order_by("-seq").values("seq")[:1]
    rows = lead_calls.filter(run_id__in=by_run, seq=Subquery(last)).values_list(
        "run_id", "data__reasoning", "data__reasoning_ms"
    )
    for run_id, reasoning, ms in rows:
        view = by_run[run_id]
        view.thinking = reasoning if isinstance(reasoning, str) else ""
        view.thinking_ms = ms if isinstance(ms, int) else None
        view.thinking_ended = True


def run_activity(*, run: Run) -> StepFold:
    """What the agents did in this run, for the activity folded under an
    answer: the fold the page's live list is made of, over every event but
    the streamed text, which makes no step (and the clock only sums the gaps
    between the events it sees, so skipping some changes no duration), with
    each model call's thinking; each artifact it names with the version
    saved, to link to."""
    fold = StepFold()
    events = run.events.exclude(type=RunEvent.Type.LLM_CHUNK).exclude(
        type=RunEvent.Type.LLM_COMPLETE, data__reasoning=""
    )
    for event in events.order_by("seq"):
        if event.type == RunEvent.Type.LLM_COMPLETE:
            step_thinking_add(fold, event)
        else:
            step_fold_apply(fold, event)
    _versions_find(fold=fold, run=run)
    return fold


@dataclass(frozen=True)
class LeadModelOption:
    """A model the composer offers for the lead agent."""

    name: str
    label: str
    thinking: bool
    selected: bool


def lead_model_options(*, chosen: str) -> list[LeadModelOption]:
    """The models the composer offers for the lead, `chosen` selected, or the
    default when it is not offered (blank, or removed from the file since).
    Empty when there is nothing to choose: no models file, the demo model, or
    fewer than two choices."""
    choices, default = lead_choices_from_settings()
    if len(choices) < 2:
        return []
    selected = chosen if chosen in {choice.name for choice in choices} else default
    return [
        LeadModelOption(
            name=choice.name, label=choice.label, thinking=choice.thinking, selected=choice.name == selected
        )
        for choice in choices
    ]


@dataclass
class ModelUse:
    """One row of an activity's model-use table: an agent's calls to one model."""

    agent: str
    model: str
    calls: int = 0
    # Of the calls, those that summarised the agent's context, and those that failed or were stopped.
    compactions: int = 0
    failed: int = 0
    # None until a call reports its usage: "not reported" is not zero.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    duration_ms: int = 0


def model_use(*, metrics: dict | None) -> list[ModelUse]:
    """The run's model calls (its metrics' agent_executions) added up by agent
    and model, in the order they were first called. Metrics from before each
    call had a record of its own hold one total per agent (`model_calls`)."""
    rows: dict[tuple[str, str], ModelUse] = {}
    for record in (metrics or {}).get("agent_executions") or []:
        key = (str(record.get("agent_name", "")), str(record.get("model", "")))
        row = rows.setdefault(key, ModelUse(*key))
        row.calls += record.get("model_calls", 1)
        row.compactions += record.get("purpose") == "compaction"
        row.failed += record.get("success") is False
        row.duration_ms += record.get("llm_duration_ms") or 0
        usage = record.get("token_usage") or {}
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens"):
            if usage.get(name) is not None:
                setattr(row, name, (getattr(row, name) or 0) + usage[name])
    return list(rows.values())


def _steps_all(steps: list[Step]):
    for step in steps:
        yield step
        yield from _steps_all(step.children)


def _versions_find(*, fold: StepFold, run: Run) -> None:
    """Names each artifact ref of the fold by the version it stands for, in
    one query. What the run wrote is the version it saved: the first of its
    saved versions numbered as high as the working copy's count (a turn saves
    once, at its end, at the next free number, so that number is at least the
    count). What it read of others' is the version read, if that is still there."""
    steps = [step for step in _steps_all(fold.steps) if step.artifact or step.stored]
    if not steps:
        return
    named = {
        (ref.artifact_id, ref.version)
        for step in steps
        for ref in (step.artifact, step.stored)
        if ref and not ref.working and ref.version is not None
    }
    conversation_id = run.message.conversation_id
    branch = branch_at(session=ArtifactSession(conversation_id=conversation_id), message_id=run.message_id)
    saved = run_versions(branch=branch, run_id=run.pk, named=named, saved_by=fold.last_at)
    by_run, by_number = {}, {}
    for version in sorted(saved, key=lambda version: version.name.number):
        if version.by_run:
            by_run.setdefault(version.artifact_id, []).append(version.name)
        by_number[version.artifact_id, version.name.number] = version.name
    for step in steps:
        if step.artifact:
            step.artifact = _ref_found(step.artifact, fold=fold, run=run, by_run=by_run, by_number=by_number)
        if step.stored:
            step.stored = _ref_found(step.stored, fold=fold, run=run, by_run=by_run, by_number=by_number)


def _ref_found(ref: ArtifactRef, *, fold: StepFold, run: Run, by_run: dict, by_number: dict) -> ArtifactRef:
    if ref.working:
        count = ref.version or 0
        saved = next((name for name in by_run.get(ref.artifact_id, []) if name.number >= count), None)
    elif ref.version is not None:
        saved = by_number.get((ref.artifact_id, ref.version))
    else:
        # A ref of no version (an event of another shape) opens the artifact as it is.
        return ref
    if saved is not None:
        return replace(ref, saved=saved)
    if run.is_active:
        missing = gettext("not saved yet: the turn saves it when it ends")
    elif ref.artifact_id in fold.unsaved:
        missing = gettext("not saved: saving it failed")
    else:
        missing = gettext("deleted since")
    return replace(ref, missing=missing)


def conversation_active_run(*, conversation_id) -> Run | None:
    """The conversation's turn still queued, running or waiting, if any: there is at most one."""
    return Run.objects.filter(message__conversation_id=conversation_id, status__in=Run.ACTIVE_STATUSES).first()


def session_active_runs(*, session_id) -> tuple[ActiveRun, ...]:
    """The conversation's turns in progress, with the artifacts their
    checkpoints carry unsaved, for the artifacts a page shows or a user changes
    (artifacts.live)."""
    # Only the checkpoint's artifacts: the rest is the turn's whole context.
    rows = Run.objects.filter(message__conversation_id=session_id, status__in=Run.ACTIVE_STATUSES).values_list(
        "pk", "message_id", "checkpoint__artifacts"
    )
    return tuple(
        ActiveRun(run_id=pk, message_id=message_id, writing=tuple(entry["artifact_id"] for entry in entries or []))
        for pk, message_id, entries in rows
    )


def branch_shown_live(*, conversation) -> Branch:
    """The branch the conversation's page shows, over the working copies of its
    turns in progress: what the pane and the artifact views show."""
    return branch_shown(conversation=conversation, active_runs=session_active_runs(session_id=conversation.pk))


def conversations_busy():
    """The ids of the conversations with a turn in progress, as a subquery:
    the artifact cleanup leaves them alone (artifacts.cleanup)."""
    return Run.objects.filter(status__in=Run.ACTIVE_STATUSES).values("message__conversation_id")


@dataclass(frozen=True)
class LibraryTitles:
    """A new conversation's view of the library: the titles it names, and
    how many more documents the user may read ("and 2 more")."""

    titles: list[str]
    more: int


def library_titles(*, language: str, user=None, limit: int = 6) -> LibraryTitles:
    """Titles of the team library's documents the user may read, oldest
    first, for a new conversation's examples: those in the reader's language
    first (Chinese titles for a reader of Chinese, the others for everyone
    else), from among the oldest LIBRARY_TITLES_SCANNED, then whatever there is."""
    documents = library_documents(user=user)
    scanned = list(documents.order_by("pk").values_list("title", flat=True)[:LIBRARY_TITLES_SCANNED])
    chinese = language.startswith("zh")
    titles = sorted(scanned, key=lambda title: bool(CJK_CHARACTER.search(title)) != chinese)[:limit]
    total = len(scanned) if len(scanned) < LIBRARY_TITLES_SCANNED else documents.count()
    return LibraryTitles(titles=titles, more=total - len(titles))


def tools_allowed(*, messages) -> list[str]:
    """Tools the user chose to always allow on the branch these messages make up."""
    return sorted({tool for step in messages for tool in step.metadata.get(ALLOWED_TOOLS, [])})


def branch_allowed_tools(*, message) -> list[str]:
    """Tools the user chose to always allow on this branch (root to `message`)."""
    return tools_allowed(messages=message_path(message_id=message.pk))


# A conversation's mark in its owner's list (conversation_marks), from what
# waits for them most to least.
MARK_WAITING = "waiting"
MARK_RUNNING = "running"
MARK_FINISHED = "finished"
_MARK_RANK = {MARK_WAITING: 0, MARK_RUNNING: 1, MARK_FINISHED: 2}


@dataclass(frozen=True)
class ConversationMarks:
    """What the user's list marks: conversation id -> its mark, and the
    titles of the marked conversations (a browser notification names one)."""

    marks: dict
    titles: dict

    @property
    def waiting_count(self) -> int:
        """What waits for the user, the tab title's count: the conversations
        waiting for their approval and those whose turn ended since they looked."""
        return sum(1 for mark in self.marks.values() if mark in (MARK_WAITING, MARK_FINISHED))

    def get(self, conversation_id) -> str:
        return self.marks.get(conversation_id, "")


def conversation_marks(*, user) -> ConversationMarks:
    """The marks of all the user's own conversations, in one query: a turn
    waiting for their approval, a turn running (queued or waiting for a slot
    too), or a turn that ended after they last looked (Conversation.seen_at).
    Only conversations with a mark are read, never the whole list."""
    runs = Run.objects.filter(message__conversation__owner=user).filter(
        Q(status__in=Run.ACTIVE_STATUSES) | Q(finished_at__gt=F("message__conversation__seen_at"))
    )
    marks, titles = {}, {}
    for conversation_id, title, status in runs.values_list(
        "message__conversation_id", "message__conversation__title", "status"
    ):
        if status == Run.Status.WAITING_PERMISSION:
            mark = MARK_WAITING
        elif status in Run.ACTIVE_STATUSES:
            mark = MARK_RUNNING
        else:
            mark = MARK_FINISHED
        if _MARK_RANK[mark] < _MARK_RANK.get(marks.get(conversation_id), len(_MARK_RANK)):
            marks[conversation_id] = mark
        titles[conversation_id] = title
    return ConversationMarks(marks=marks, titles=titles)
