"""The thread as a conversation's page shows it: each message of the branch
with what its latest run did so far (agents.selectors's fold of the run's
events), and its siblings for the branch switcher. A page shows a window of
the branch (ThreadPage), so a conversation of a thousand turns opens as light as
one of ten."""

from dataclasses import dataclass, field
from functools import cached_property

from django.conf import settings
from django.db.models import Exists, OuterRef, Prefetch, Q, prefetch_related_objects

from artifactflow.citations import ANSWER_WHERE, CITATIONS_KEY, citations_unfound_mark
from artifactflow.markdown import live_answer
from artifactflow.rendered import answer_html
from conversations.models import Conversation, Message
from conversations.tree import message_path, message_path_ids

from .models import Run
from .projection import RunView
from .selectors import run_views, tools_allowed


@dataclass
class ThreadEntry:
    """A message as the thread shows it, with what its latest run did so far."""

    message: Message
    view: RunView
    # The ids of the message and its siblings (same parent), oldest first.
    siblings: list[int] = field(default_factory=list)

    @cached_property
    def answer(self):
        """The answer as HTML, or for a run still writing it, as finished blocks and the block being written."""
        if self.view.is_active:
            return live_answer(self.view.text)
        return citations_unfound_mark(
            answer_html(self.view.text), check=self.message.metadata.get(CITATIONS_KEY), where=ANSWER_WHERE
        )

    @property
    def citations(self) -> dict | None:
        """Its turn's citation check (agents.services.citations)."""
        return self.message.metadata.get(CITATIONS_KEY)

    @property
    def position(self) -> int:
        return self.siblings.index(self.message.pk) + 1

    @property
    def previous_sibling(self) -> int | None:
        return self.siblings[self.position - 2] if self.position > 1 else None

    @property
    def next_sibling(self) -> int | None:
        return self.siblings[self.position] if self.position < len(self.siblings) else None


def thread_entries(*, messages: list[Message]) -> list[ThreadEntry]:
    # Each run brings its own copy of the message from the same statement, so a
    # finished run's status and its stored response are read together even while
    # the worker commits the end of the turn.
    runs = Run.objects.select_related("message").annotate(retried=Exists(Run.objects.filter(retry_of=OuterRef("pk"))))
    prefetch_related_objects(messages, Prefetch("runs", queryset=runs))
    latest = {m.pk: (list(m.runs.all()) or [None])[-1] for m in messages}
    views = run_views(runs=[run for run in latest.values() if run is not None])
    siblings = _siblings(messages)
    return [
        ThreadEntry(
            message=m,
            # A message without a run (imported, or made by hand) shows its stored response.
            view=views[latest[m.pk].pk] if latest[m.pk] else RunView(status="", activity="", text=m.response),
            siblings=siblings[m.parent_id],
        )
        for m in messages
    ]


def _siblings(messages: list[Message]) -> dict[int | None, list[int]]:
    """For each parent of these messages, its children's ids, in one query."""
    if not messages:
        return {}
    parents = {m.parent_id for m in messages}
    children = Q(parent_id__in=[p for p in parents if p is not None])
    if None in parents:
        children |= Q(parent__isnull=True)
    found = {parent: [] for parent in parents}
    rows = Message.objects.filter(children, conversation_id=messages[0].conversation_id).order_by("created_at", "id")
    for pk, parent in rows.values_list("pk", "parent_id"):
        found[parent].append(pk)
    return found


def thread_for_conversation(*, conversation: Conversation) -> list[ThreadEntry]:
    """The active branch, root first."""
    if conversation.active_branch_id is None:
        return []
    return thread_entries(messages=message_path(message_id=conversation.active_branch_id))


@dataclass
class ThreadPage:
    """A window of the branch shown, root side first, and where the turns
    before it begin: `older` is the id of its first message when older turns
    exist (the cursor that loads them), `older_first` the first message of the
    window before it (where a link without htmx opens the page)."""

    entries: list[ThreadEntry]
    older: int | None = None
    older_first: int | None = None
    # The tools always allowed on the branch, from all of it, not only the window.
    allowed_tools: list[str] = field(default_factory=list)


def thread_page(*, conversation: Conversation, message_id: int | None = None) -> ThreadPage:
    """The newest settings.THREAD_PAGE_TURNS turns of the active branch; with
    `message_id` (a link to one message of that branch) the turns from it to
    the newest, so the page opens on it and still ends where a new turn goes.
    A message of another branch is not linked to: the page opens on the newest."""
    path = message_path_ids(message_id=conversation.active_branch_id)
    start = max(len(path) - settings.THREAD_PAGE_TURNS, 0)
    if message_id in path:
        start = min(start, path.index(message_id))
    page = _window(path=path, start=start, end=len(path))
    page.allowed_tools = tools_allowed(messages=Message.objects.filter(pk__in=path).only("metadata"))
    return page


def thread_page_before(*, message: Message) -> ThreadPage:
    """The settings.THREAD_PAGE_TURNS turns before `message` on its branch
    (its ancestors: one branch whichever the conversation shows now)."""
    path = message_path_ids(message_id=message.pk)
    end = len(path) - 1
    return _window(path=path, start=max(end - settings.THREAD_PAGE_TURNS, 0), end=end)


def _window(*, path: list[int], start: int, end: int) -> ThreadPage:
    ids = path[start:end]
    # Only the window's rows are read: a long thread's answers stay in the database.
    found = Message.objects.in_bulk(ids)
    entries = thread_entries(messages=[found[pk] for pk in ids if pk in found])
    if start == 0:
        return ThreadPage(entries=entries)
    return ThreadPage(entries=entries, older=path[start], older_first=path[max(start - settings.THREAD_PAGE_TURNS, 0)])


def thread_entry_for_run(*, conversation: Conversation, run_id: int) -> ThreadEntry | None:
    message = Message.objects.filter(conversation=conversation, runs__pk=run_id).first()
    if message is None:
        return None
    return thread_entries(messages=[message])[0]


def thread_entry_for_message(*, conversation: Conversation, message_id: int, view: RunView) -> ThreadEntry | None:
    """The message shown with a view its caller folded already."""
    message = Message.objects.filter(conversation=conversation, pk=message_id).first()
    if message is None:
        return None
    return ThreadEntry(message=message, view=view, siblings=_siblings([message])[message.parent_id])
