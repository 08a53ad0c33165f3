"""What a run has done so far, and the reads about runs that the pages and a
run's start share: a user's run, a conversation's active one, the tools
always allowed on a branch.

Runs are shown from their one projection (agents.projection): the page and
the websocket consumer render the same view, so a view rebuilt after a
reload or a dropped message is the view that streamed, and the activity under
a finished answer is the same fold of its steps.
"""

from dataclasses import dataclass, replace

from django.conf import settings
from django.db.models import F, OuterRef, Q, Subquery
from django.utils.translation import gettext

from artifactflow.textsearch import CJK_CHARACTER
from artifacts.branches import Branch, branch_at, branch_shown
from artifacts.live import ActiveRun
from artifacts.models import ArtifactSession
from artifacts.selectors import run_versions
from conversations.selectors import readable_filter
from conversations.tree import message_path
from library.selectors import library_documents

from .config import AGENTS, LEAD_AGENT
from .llm.config import lead_choices_from_settings
from .models import Run, RunEvent, RunNotice
from .projection import RunView, run_view_apply, stored_text
from .steps import ArtifactRef, Step, StepFold
from .tools.base import CONFIRM

# Message metadata key: tools the user always allows on the branch through it.
ALLOWED_TOOLS = "allowed_tools"
# A library of thousands is not sorted for six examples.
LIBRARY_TITLES_SCANNED = 200


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
    view = RunView(fold=StepFold(thinking_steps=True))
    events = run.events.exclude(type=RunEvent.Type.LLM_CHUNK).exclude(
        type=RunEvent.Type.LLM_COMPLETE, data__reasoning=""
    )
    for event in events.order_by("seq"):
        run_view_apply(view, event)
    _versions_find(fold=view.fold, run=run)
    return view.fold


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


def tools_needing_approval() -> list[str]:
    """The built-in tools that ask before they run (ARTIFACTFLOW_TOOL_PERMISSIONS
    may change which): what a schedule's owner can allow it to run unattended."""
    return sorted(
        {
            tool.name
            for config in AGENTS.values()
            for tool in config.tools
            if settings.TOOL_PERMISSIONS.get(tool.name, tool.permission) == CONFIRM
        }
    )


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
    """The marks of all the user's conversations, in one query: of their own,
    a turn waiting for their approval, a turn running (queued or waiting for a
    slot too), or a turn that ended after they last looked (Conversation.seen_at);
    of others', a turn whose end they were told of (RunNotice) and have not
    looked at since. Only conversations with a mark are read, never the whole list."""
    runs = Run.objects.filter(message__conversation__owner=user).filter(
        Q(status__in=Run.ACTIVE_STATUSES) | Q(finished_at__gt=F("message__conversation__seen_at"))
    )
    columns = ("message__conversation_id", "message__conversation__title", "status")
    # A union, so each side keeps its own index: the runs by owner, the notices by user.
    notices = (
        RunNotice.objects.filter(user=user, seen_at__isnull=True)
        .exclude(run__message__conversation__owner=user)
        .values_list("run__message__conversation_id", "run__message__conversation__title", "run__status")
        .order_by()
    )
    marks, titles = {}, {}
    for conversation_id, title, status in runs.values_list(*columns).order_by().union(notices, all=True):
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
