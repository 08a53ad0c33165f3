"""Write-side operations on conversations and their message trees. Asking (posting a
message, which starts a turn) and deleting are agents.services.asking's."""

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.utils import timezone
from django.utils.translation import gettext

from artifactflow import realtime

from .models import Conversation, Message


def branch_switch(*, conversation: Conversation, message: Message) -> Message:
    """Show the branch through `message`: it, and below it the newest reply at
    each level. Returns the new active leaf."""
    if message.conversation_id != conversation.pk:
        raise ValidationError(gettext("That message belongs to another conversation."))
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
        raise ValidationError(gettext("A conversation needs a title."))
    ProhibitNullCharactersValidator()(title)
    max_length = Conversation._meta.get_field("title").max_length
    if len(title) > max_length:
        raise ValidationError(gettext("A title may have at most %(max)s characters.") % {"max": max_length})
    conversation.title = title
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


# The pinned group heads every page of the list: a handful, not a second list.
MAX_PINNED = 20


def conversation_pin(*, conversation: Conversation, pinned: bool) -> Conversation:
    """Pin the conversation to the top of its owner's list, or unpin it back
    into its date group. Pinning is not news: the list's order by last update
    stays (queryset update, no `updated_at`)."""
    if pinned and conversation.pinned_at is None:
        count = Conversation.objects.filter(owner_id=conversation.owner_id, pinned_at__isnull=False).count()
        if count >= MAX_PINNED:
            raise ValidationError(
                gettext("At most %(max)s conversations can be pinned: unpin one first.") % {"max": MAX_PINNED}
            )
        conversation.pinned_at = timezone.now()
    elif not pinned:
        conversation.pinned_at = None
    Conversation.objects.filter(pk=conversation.pk).update(pinned_at=conversation.pinned_at)
    return conversation


def conversation_seen(*, conversation: Conversation) -> None:
    """The owner has looked at the conversation: its turns that ended before
    now are no longer news. Every page of the owner hears of it (their marks
    and the tab title change)."""
    conversation.seen_at = timezone.now()
    Conversation.objects.filter(pk=conversation.pk).update(seen_at=conversation.seen_at)
    realtime.group_send_on_commit(
        group=realtime.user_group(conversation.owner_id),
        type=realtime.RUN_STATE,
        conversation_id=str(conversation.pk),
    )
