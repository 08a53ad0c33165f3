"""Read-side queries for conversations. Every query is scoped to a user."""

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext, pgettext

from artifactflow.ids import id_from_text
from projects.access import project_readable

from . import search
from .models import Conversation, ConversationShare, Message

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
        # Pinned conversations are listed apart (conversation_pinned), above every page,
        # and those in projects under their projects (projects.selectors.projects_sidebar).
        conversations = search.conversations_before(user=user, before=position).filter(
            pinned_at__isnull=True, project__isnull=True
        )
        items = list(conversations[: limit + 1])
    next_cursor = ""
    if len(items) > limit:
        items = items[:limit]
        next_cursor = _cursor(items[-1])
    # The cursor is the last conversation of the page before, so it also says
    # which group that page ended in.
    groups = date_groups(items=items, after=position[0] if position else None, today=timezone.localdate())
    return ConversationPage(items=items, groups=groups, next_cursor=next_cursor)


def conversation_pinned(*, user) -> list[Conversation]:
    """The user's pinned conversations, the last pinned first (a few: services.MAX_PINNED)."""
    conversations = Conversation.objects.filter(owner=user, pinned_at__isnull=False)
    return list(
        conversations.only("id", "title", "updated_at", "pinned_at", "forked_from").order_by("-pinned_at", "-id")
    )


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
        return "today", gettext("Today")
    if age == 1:
        return "yesterday", gettext("Yesterday")
    if age <= 7:
        return "previous-7-days", gettext("Previous 7 days")
    if age <= 30:
        return "previous-30-days", gettext("Previous 30 days")
    # The sidebar is narrow: this year's months go without the year. Each
    # language writes a month its own way ("十一月", "2025年11月").
    if day.year == today.year:
        label = date_format(day, pgettext("date format of a month this year, in the conversation list", "F"))
    else:
        label = date_format(day, pgettext("date format of a month another year, in the conversation list", "F Y"))
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


def readable_filter(*, user, via: str = "") -> Q:
    """The one rule for what a user may read: a conversation they own, one
    shared with them (with them by name, a group they are in, or everyone
    signed in), or one in a project they may read (projects.access). `via` is the path from the filtered model to its
    conversation, e.g. "message__conversation__"."""
    if not user.is_authenticated:
        # Login only: nothing is ever shared with someone signed out.
        return Q(pk__in=[])
    shared = ConversationShare.objects.filter(conversation=OuterRef(f"{via}pk" if via else "pk")).filter(
        _share_audience(user=user)
    )
    # A project's owner and members read every conversation in it.
    return Q(**{f"{via}owner": user}) | Q(Exists(shared)) | project_readable(user=user, via=f"{via}project__")


def _share_audience(*, user) -> Q:
    """The shares that let a signed-in user in: theirs by name, a group's they are in, everyone's."""
    return Q(everyone=True) | Q(user=user) | Q(group__user=user)


def conversation_viewable(*, user, conversation_id) -> Conversation | None:
    """The conversation with this id if the user may read it (their own or
    shared with them), with its owner, or None. Only reading: every write
    finds its conversation with conversation_get, the owner's alone."""
    try:
        return Conversation.objects.select_related("owner").filter(readable_filter(user=user)).get(pk=conversation_id)
    except (Conversation.DoesNotExist, ValidationError, ValueError, TypeError):
        return None


def conversations_shared_with(*, user, limit: int = PAGE_SIZE) -> list[Conversation]:
    """Other people's conversations the user may read, newest first."""
    if not user.is_authenticated:
        return []
    # From the shares, few, rather than every conversation of the portal tested against them.
    shares = ConversationShare.objects.filter(_share_audience(user=user)).values("conversation_id")
    found = Conversation.objects.exclude(owner=user).filter(pk__in=shares).select_related("owner")
    return list(found.order_by("-updated_at", "-pk")[:limit])


def conversation_shares(*, conversation: Conversation) -> list[ConversationShare]:
    """Whom the conversation is shared with: everyone first, then by when."""
    return list(ConversationShare.objects.filter(conversation=conversation).select_related("user", "group"))


def share_groups(*, user) -> QuerySet[Group]:
    """The groups (teams) the user may share a conversation with: those they
    are in, or with ARTIFACTFLOW_SHARE_ANY_GROUP every group. Anyone else's
    group, even its name, stays out of their sight; the admin shares with any."""
    groups = Group.objects.all() if settings.SHARE_ANY_GROUP else Group.objects.filter(user=user)
    return groups.order_by("name")


def message_get(*, conversation: Conversation, message_id) -> Message | None:
    """The message of this conversation that `message_id` (text from a form) names, or None."""
    pk = id_from_text(message_id)
    if pk is None:
        return None
    return Message.objects.filter(conversation=conversation, pk=pk).first()
