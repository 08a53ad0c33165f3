"""Write-side operations on conversations and their message trees. Asking (posting a
message, which starts a turn) and deleting are agents.services.asking's."""

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.utils.translation import gettext

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
    # A title the person chose: the model's proposal never replaces it (agents.titling).
    conversation.metadata = {**conversation.metadata, "title_source": "user"}
    conversation.save(update_fields=["title", "metadata", "updated_at"])
    return conversation
