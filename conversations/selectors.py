"""Read-side queries for conversations. Every query is scoped to a user."""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db.models import Prefetch, Q, prefetch_related_objects

from agents.models import Run
from agents.selectors import RunView, run_views
from artifactflow.ids import id_from_text

from .models import Conversation, Message


def conversation_list(*, user, query: str = ""):
    """The user's conversations, newest first; with a query, those whose title
    or any message or answer contains it."""
    conversations = Conversation.objects.filter(owner=user)
    # No text in the database holds a NUL, and Postgres refuses to look for one.
    query = query.replace("\x00", "").strip()
    if query:
        matching = Message.objects.filter(Q(content__icontains=query) | Q(response__icontains=query))
        conversations = conversations.filter(Q(title__icontains=query) | Q(pk__in=matching.values("conversation_id")))
    return conversations.order_by("-updated_at")


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


def message_path(*, message_id: int) -> list[Message]:
    """The messages from the root down to this one, in one query whatever the depth."""
    table = Message._meta.db_table
    # The ORM has no recursive CTE; this one walks up the parent links from the
    # leaf and is the same SQL on SQLite and Postgres.
    return list(
        Message.objects.raw(
            f"""
            WITH RECURSIVE path(id, depth) AS (
                SELECT id, 0 FROM {table} WHERE id = %s
                UNION ALL
                SELECT m.parent_id, path.depth + 1 FROM {table} m
                JOIN path ON m.id = path.id WHERE m.parent_id IS NOT NULL
            )
            SELECT {table}.* FROM {table} JOIN path ON {table}.id = path.id
            ORDER BY path.depth DESC
            """,
            [message_id],
        )
    )


@dataclass
class ThreadEntry:
    """A message as the thread shows it, with what its latest run did so far."""

    message: Message
    view: RunView
    # The ids of the message and its siblings (same parent), oldest first.
    siblings: list[int] = field(default_factory=list)

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


def thread_entry_for_run(*, conversation: Conversation, run_id: int) -> ThreadEntry | None:
    message = Message.objects.filter(conversation=conversation, runs__pk=run_id).first()
    if message is None:
        return None
    return thread_entries(messages=[message])[0]
