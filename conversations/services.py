"""Write-side operations on conversations and their message trees."""

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.db import transaction

from agents.models import Run
from agents.services.runs import TurnInProgress, run_create
from artifacts.models import ArtifactSession

from .models import Conversation, Message

MAX_MESSAGE_LENGTH = 20_000
TITLE_LENGTH = 80

# Passed as `parent` to continue the branch the user is looking at.
ACTIVE_BRANCH = object()


def conversation_start(*, user, content: str, enqueue: bool = True) -> Conversation:
    """A new conversation (with its artifact session) that opens with `content`."""
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=user)
        ArtifactSession.objects.create(conversation=conversation)
        message_post(conversation=conversation, content=content, enqueue=enqueue)
    return conversation


def _title_from(content: str) -> str:
    line = " ".join(content.split())
    if len(line) <= TITLE_LENGTH:
        return line
    return line[:TITLE_LENGTH].rsplit(" ", 1)[0] + "…"


def message_post(*, conversation: Conversation, content: str, parent=ACTIVE_BRANCH, enqueue: bool = True) -> Message:
    """Store a user message and a queued run for it; the turn starts once committed.

    `parent` is ACTIVE_BRANCH (continue what the user sees), a message of this
    conversation (branch there) or None (a new root). The new message becomes
    the active branch.
    """
    content = content.strip()
    if not content:
        raise ValidationError("Write a message first.")
    # Postgres cannot store a NUL character: say so rather than fail.
    ProhibitNullCharactersValidator()(content)
    if len(content) > MAX_MESSAGE_LENGTH:
        raise ValidationError(f"A message may have at most {MAX_MESSAGE_LENGTH} characters.")
    if parent is ACTIVE_BRANCH:
        parent = conversation.active_branch
    elif parent is not None and parent.conversation_id != conversation.pk:
        raise ValidationError("That message belongs to another conversation.")

    try:
        with transaction.atomic():
            message = Message.objects.create(conversation=conversation, parent=parent, content=content)
            run_create(message=message, enqueue=enqueue)
            conversation.active_branch = message
            if not conversation.title:
                conversation.title = _title_from(content)
            conversation.save(update_fields=["active_branch", "title", "updated_at"])
    except TurnInProgress as exc:
        raise ValidationError(str(exc)) from None
    return message


def branch_switch(*, conversation: Conversation, message: Message) -> Message:
    """Show the branch through `message`: it, and below it the newest reply at
    each level. Returns the new active leaf."""
    if message.conversation_id != conversation.pk:
        raise ValidationError("That message belongs to another conversation.")
    # The tree's shape in one query, not one query per level of a long branch.
    newest_reply = {}
    rows = Message.objects.filter(conversation=conversation).order_by("created_at", "id").values_list("pk", "parent_id")
    for pk, parent_id in rows:
        newest_reply[parent_id] = pk
    leaf_id = message.pk
    while leaf_id in newest_reply:
        leaf_id = newest_reply[leaf_id]
    # Looking at another branch is not news: the list keeps its order.
    Conversation.objects.filter(pk=conversation.pk).update(active_branch=leaf_id)
    conversation.active_branch_id = leaf_id
    return conversation.active_branch


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    title = " ".join(title.split())
    if not title:
        raise ValidationError("A conversation needs a title.")
    ProhibitNullCharactersValidator()(title)
    max_length = Conversation._meta.get_field("title").max_length
    if len(title) > max_length:
        raise ValidationError(f"A title may have at most {max_length} characters.")
    conversation.title = title
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    """Delete the conversation with its messages, runs and artifacts.

    Refused while a turn is queued, running or waiting for permission (seed
    001 `session_active`): the user stops it and deletes once it has ended,
    since a worker may still be writing its events and artifacts.
    """
    with transaction.atomic():
        # Locked, so neither a worker nor a retry changes these runs between the check and the delete.
        runs = Run.objects.select_for_update(of=("self",)).filter(message__conversation=conversation)
        if any(status in Run.ACTIVE_STATUSES for status in runs.values_list("status", flat=True)):
            raise ValidationError(
                "A turn is still in progress here. Stop it, and delete the conversation once it has ended."
            )
        conversation.delete()
