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


@receiver(m2m_changed, sender=get_user_model().groups.through, dispatch_uid="conversations.group_left")
def group_left(*, instance, action, reverse, pk_set, **kwargs):
    if action not in ("post_remove", "pre_clear"):
        return
    if not reverse:
        # user.groups.remove(...) or .clear(): one user leaves.
        user_ids = [instance.pk]
    elif action == "pre_clear":
        user_ids = list(instance.user_set.values_list("pk", flat=True))
    else:
        # group.user_set.remove(...): these users leave.
        user_ids = list(pk_set or ())
    for user_id in user_ids:
        realtime.group_send_on_commit(group=realtime.user_group(user_id), type=realtime.SHARES_CHANGED)
