"""Read-side queries for conversations. Every query is scoped to a user."""

import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import cached_property

from django.core.exceptions import ValidationError
from django.db.models import Prefetch, Q, prefetch_related_objects
from django.utils import timezone
from django.utils.formats import date_format

from agents.models import Run
from agents.selectors import RunView, run_views
from artifactflow.ids import id_from_text
from artifactflow.markdown import live_answer, markdown_render

from . import search
from .models import Conversation, Message
from .tree import message_path

PAGE_SIZE = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ConversationGroup:
    """The conversations of a page under one date heading."""

    # Unique within the list and stable across its pages, so a page can name
    # the group it continues: "today", "yesterday", "previous-7-days",
    # "previous-30-days" or a month, "2026-10".
    key: str
    label: str
    items: list[Conversation]
    # The page before ended in this group, whose heading the list already shows.
    continued: bool = False


@dataclass(frozen=True)
class ConversationPage:
    """One page of the conversation list (or of search results), grouped by
    date, and the cursor of the next page, "" after the last."""

    items: list[Conversation]
    groups: list[ConversationGroup]
    next_cursor: str = ""

    def __iter__(self):
        return iter(self.items)


def conversation_list(*, user, query: str = "", before: str = "", limit: int = PAGE_SIZE) -> ConversationPage:
    """A page of the user's conversations, newest first, from the cursor
    `before` on (the first page without one); with a query, only those whose
    title, questions, answers or artifacts contain its words."""
    # No text in the database holds a NUL, and Postgres refuses to look for one.
    query = query.replace("\x00", "").strip()
    position = _cursor_position(before)
    # One more than a page says whether another page follows.
    if query:
        items = search.conversation_search(user=user, query=query, before=position, limit=limit + 1)
    else:
        items = list(search.conversations_before(user=user, before=position)[: limit + 1])
    next_cursor = ""
    if len(items) > limit:
        items = items[:limit]
        next_cursor = _cursor(items[-1])
    # The cursor is the last conversation of the page before, so it also says
    # which group that page ended in.
    groups = date_groups(items=items, after=position[0] if position else None, today=timezone.localdate())
    return ConversationPage(items=items, groups=groups, next_cursor=next_cursor)


def date_groups(*, items: list[Conversation], after: datetime | None, today: date) -> list[ConversationGroup]:
    """These conversations (newest first) under their date headings, the first
    marked continued when it is the group of `after`, the last moment of the
    page before."""
    groups = []
    previous = date_heading(moment=after, today=today)[0] if after else None
    for item in items:
        key, label = date_heading(moment=item.updated_at, today=today)
        if not groups or groups[-1].key != key:
            groups.append(ConversationGroup(key=key, label=label, items=[], continued=not groups and key == previous))
        groups[-1].items.append(item)
    return groups


def date_heading(*, moment: datetime, today: date) -> tuple[str, str]:
    """The (key, label) of the heading a conversation last updated at `moment`
    goes under, counted in days of the active time zone (TIME_ZONE unless a
    view activated another) up to `today`."""
    day = timezone.localtime(moment).date()
    age = (today - day).days
    # A moment ahead of the clock (another machine's) is today too.
    if age <= 0:
        return "today", "Today"
    if age == 1:
        return "yesterday", "Yesterday"
    if age <= 7:
        return "previous-7-days", "Previous 7 days"
    if age <= 30:
        return "previous-30-days", "Previous 30 days"
    # The sidebar is narrow: this year's months go without the year.
    label = date_format(day, "F" if day.year == today.year else "F Y")
    return f"{day:%Y-%m}", label


def _cursor(conversation: Conversation) -> str:
    # Whole microseconds, so the position survives the round trip exactly.
    micros = (conversation.updated_at - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}_{conversation.pk.hex}"


def _cursor_position(cursor: str) -> tuple[datetime, uuid.UUID] | None:
    """The (updated_at, id) a cursor names; None (the first page) for one that
    is missing or malformed."""
    micros, _, pk = cursor.partition("_")
    try:
        return _EPOCH + timedelta(microseconds=int(micros)), uuid.UUID(hex=pk)
    except (ValueError, OverflowError):
        return None


def conversation_get(*, user, conversation_id) -> Conversation | None:
    """The user's conversation with this id, or None (also for a malformed id)."""
    try:
        return Conversation.objects.filter(owner=user).get(pk=conversation_id)
    except (Conversation.DoesNotExist, ValidationError, ValueError, TypeError):
        return None


def message_get(*, conversation: Conversation, message_id) -> Message | None:
    """The message of this conversation that `message_id` (text from a form) names, or None."""
    pk = id_from_text(message_id)
    if pk is None:
        return None
    return Message.objects.filter(conversation=conversation, pk=pk).first()


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
    prefetch_related_objects(messages, Prefetch("runs", queryset=Run.objects.select_related("message")))
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
