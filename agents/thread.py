"""The thread as a conversation's page shows it: each message of the branch
with what its latest run did so far (agents.selectors's fold of the run's
events), and its siblings for the branch switcher."""

from dataclasses import dataclass, field
from functools import cached_property

from django.db.models import Exists, OuterRef, Prefetch, Q, prefetch_related_objects

from artifactflow.markdown import live_answer, markdown_render
from conversations.models import Conversation, Message
from conversations.tree import message_path

from .models import Run
from .selectors import RunView, run_views


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
        return self.view.html or markdown_render(self.view.text)

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
            view=views[latest[m.pk].pk]
            if latest[m.pk]
            else RunView(status="", activity="", text=m.response, html=m.response_html),
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
