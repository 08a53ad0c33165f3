"""A revoked share closes the pages it opened: every change that can take
someone's read access away (a share deleted, from the portal, the admin or a
group's deletion; a user leaving a group) tells the websockets concerned to
check their access again (live.consumers.ConversationConsumer.shares_changed)."""

from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed, post_delete
from django.dispatch import receiver

from artifactflow import realtime

from .models import ConversationShare


@receiver(post_delete, sender=ConversationShare, dispatch_uid="conversations.share_revoked")
def share_revoked(*, instance, **kwargs):
    realtime.event_send_on_commit(conversation_id=instance.conversation_id, type=realtime.SHARES_CHANGED)


def groups_left(*, instance, action: str, reverse: bool, pk_set) -> list:
    """The groups someone left, from an m2m_changed of the users' groups
    (projects.signals reads them too); none for a change that adds."""
    if action not in ("post_remove", "pre_clear"):
        return []
    if reverse:
        # group.user_set.remove(...) or .clear(): this group.
        return [instance.pk]
    if action == "pre_clear":
        return list(instance.groups.values_list("pk", flat=True))
    return list(pk_set or ())


@receiver(m2m_changed, sender=get_user_model().groups.through, dispatch_uid="conversations.group_left")
def group_left(*, instance, action, reverse, pk_set, **kwargs):
    """Someone left a group (or a group lost members): the pages of the
    conversations shared with it check again. Sent to those conversations'
    groups, which only their pages listen on, not to the users'."""
    group_ids = groups_left(instance=instance, action=action, reverse=reverse, pk_set=pk_set)
    shared = ConversationShare.objects.filter(group_id__in=group_ids).values_list("conversation_id", flat=True)
    for conversation_id in set(shared):
        realtime.event_send_on_commit(conversation_id=conversation_id, type=realtime.SHARES_CHANGED)
