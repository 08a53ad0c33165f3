"""A user's websockets end with their session (consumers):
signing out closes the sockets that session opened, and a changed password or
account makes every socket of the user check its session at once, not at its
next periodic check. And a user's pages hear when a run of theirs changes
state (the list's marks, live.consumers.RunStateMixin)."""

from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_save
from django.dispatch import receiver

from agents.models import Run
from artifactflow import realtime
from conversations.models import Conversation, Message

from . import sockets

# Saving these fields may end the user's sessions (the password's hash signs
# each one; an inactive user signs in nowhere).
SESSION_FIELDS = frozenset({"password", "is_active"})


@receiver(user_logged_out, dispatch_uid="live.sockets_close_on_logout")
def sockets_close_on_logout(*, request, user, **kwargs):
    # Sent before the session is flushed, so its key is still the one signing out.
    # Only the sockets of this session close: the user's other browsers are still
    # signed in. Without a request (channels' logout), the periodic check closes them.
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if user is None or not session_key:
        return
    realtime.group_send_on_commit(
        group=realtime.user_group(user.pk), type=realtime.SESSION_ENDED, session=sockets.session_tag(session_key)
    )


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="live.sockets_check_on_account_change")
def sockets_check_on_account_change(*, instance, created, update_fields, **kwargs):
    # Every save but a sign-in's (last_login alone): the password hash cannot be
    # compared with what it was without another query, and a needless check
    # costs each open socket one session read.
    if created or (update_fields is not None and not SESSION_FIELDS & set(update_fields)):
        return
    realtime.group_send_on_commit(group=realtime.user_group(instance.pk), type=realtime.SESSION_CHANGED)


@receiver(post_save, sender=Run, dispatch_uid="live.run_state_announce")
def run_state_announce(*, instance, created, update_fields, **kwargs):
    # A run's status changes by save() wherever it matters to the marks:
    # created, paused for approval, answered, ended. The claim that turns
    # queued into running is an update(): the mark ("running") stays.
    if not created and update_fields is not None and "status" not in update_fields:
        return
    message = instance.message
    conversation_id = message.conversation_id
    owner_id = (
        message.conversation.owner_id
        if Message.conversation.is_cached(message)
        else Conversation.objects.filter(pk=conversation_id).values_list("owner_id", flat=True).first()
    )
    if owner_id is None:
        return
    realtime.group_send_on_commit(
        group=realtime.user_group(owner_id), type=realtime.RUN_STATE, conversation_id=str(conversation_id)
    )
