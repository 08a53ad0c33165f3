"""Write-side operations on conversations and their message trees. Asking (posting a
message, which starts a turn) and deleting are conversations.lifecycle's."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext

from artifactflow import realtime
from artifactflow.ids import id_from_text
from artifactflow.names import name_line
from audit.models import AuditEvent
from audit.services import audit_record

from .models import Conversation, ConversationShare, Message
from .selectors import share_groups


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
    # Without what hides or reorders text (a right-to-left override, NUL, zero-width spaces).
    title = name_line(title)
    if not title:
        raise ValidationError(gettext("A conversation needs a title."))
    max_length = Conversation._meta.get_field("title").max_length
    if len(title) > max_length:
        raise ValidationError(gettext("A title may have at most %(max)s characters.") % {"max": max_length})
    conversation.title = title
    # A title the person chose: the model's proposal never replaces it (agents.titling).
    conversation.metadata = {**conversation.metadata, "title_source": "user"}
    conversation.save(update_fields=["title", "metadata", "updated_at"])
    return conversation


def share_with_user(*, conversation: Conversation, by, username: str) -> ConversationShare:
    """Let the user called `username` read the conversation (again: sharing twice is one share)."""
    username = username.strip()
    user = get_user_model().objects.filter(username=username, is_active=True).first() if username else None
    if user is None:
        raise ValidationError(gettext("No one here is called “%(name)s”.") % {"name": username})
    if user.pk == conversation.owner_id:
        raise ValidationError(gettext("It is your own conversation."))
    share, created = ConversationShare.objects.get_or_create(
        conversation=conversation, user=user, defaults={"created_by": by}
    )
    if created:
        _share_audit(share, action=AuditEvent.Action.SHARE)
    return share


def share_with_group(*, conversation: Conversation, by, group_id) -> ConversationShare:
    """Let every member of the group read the conversation, whoever joins it
    later too. Only a group `by` may share with (selectors.share_groups): a
    request naming another, or none there is, is refused alike."""
    if not str(group_id or "").strip():
        raise ValidationError(gettext("Choose a group."))
    pk = id_from_text(group_id)
    group = share_groups(user=by).filter(pk=pk).first() if pk is not None else None
    if group is None:
        raise ValidationError(gettext("That group cannot be chosen here. Choose one of the groups listed."))
    share, created = ConversationShare.objects.get_or_create(
        conversation=conversation, group=group, defaults={"created_by": by}
    )
    if created:
        _share_audit(share, action=AuditEvent.Action.SHARE)
    return share


def share_with_everyone(*, conversation: Conversation, by, on: bool) -> None:
    """Let everyone signed in read the conversation, or stop that."""
    if on:
        share, created = ConversationShare.objects.get_or_create(
            conversation=conversation, everyone=True, defaults={"created_by": by}
        )
        if created:
            _share_audit(share, action=AuditEvent.Action.SHARE)
        return
    share = ConversationShare.objects.filter(conversation=conversation, everyone=True).first()
    if share is not None:
        share_remove(conversation=conversation, share_id=share.pk)


def share_remove(*, conversation: Conversation, share_id: int) -> bool:
    """Revoke one of the conversation's shares; open pages of those who lose
    access close (conversations.signals). False if it has no such share."""
    share = ConversationShare.objects.filter(conversation=conversation, pk=share_id).first()
    if share is None:
        return False
    # Deleted as an instance, not by a queryset: post_delete announces it.
    share.delete()
    _share_audit(share, action=AuditEvent.Action.SHARE_REVOKE)
    return True


def _share_audit(share: ConversationShare, *, action: str) -> None:
    if share.everyone:
        audience = "everyone"
    elif share.group_id is not None:
        audience = f"group {share.group.name}"
    else:
        audience = f"user {share.user.get_username()}"
    audit_record(action=action, obj=share.conversation, detail={"with": audience})


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
