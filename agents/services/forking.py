"""Forking: a person continues a branch of a conversation (one shared with
them, or their own) in a conversation of their own. The fork holds copies, so
neither conversation's later turns, edits or deletion touch the other."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext

from artifacts.branches import branch_at
from artifacts.models import ArtifactSession
from artifacts.services import branch_copy
from conversations.models import Conversation, Message
from conversations.tree import message_path

from ..selectors import ALLOWED_TOOLS

FORKED_FROM = "forked_from"


def conversation_fork(*, user, conversation: Conversation, message: Message) -> Conversation:
    """A new conversation of `user`'s holding the branch of `conversation` from
    its root down to `message` (questions and answers) and the artifacts as
    that branch had them, saying where it came from. The tools the original's
    owner always allowed are not carried over: the new owner decides their own.
    The caller checks that `user` may read `conversation`."""
    if message.conversation_id != conversation.pk:
        raise ValidationError(gettext("That message belongs to another conversation."))
    # Read afresh: the answer is stored when its turn ends.
    path = message_path(message_id=message.pk)
    if not path[-1].response:
        raise ValidationError(gettext("This message has no answer yet; continue from one that has."))
    with transaction.atomic():
        fork = Conversation.objects.create(
            owner=user,
            title=conversation.title,
            lead_model=conversation.lead_model,
            forked_from=conversation,
            forked_at=message,
            # Said on the fork's page after the original is gone or no longer shared, as it was when forked.
            metadata={FORKED_FROM: {"title": conversation.title, "owner": conversation.owner.get_username()}},
        )
        session = ArtifactSession.objects.create(conversation=fork)
        parent = None
        copied = {}
        for original in path:
            parent = Message.objects.create(
                conversation=fork,
                parent=parent,
                content=original.content,
                response=original.response,
                response_html=original.response_html,
                metadata={key: value for key, value in original.metadata.items() if key != ALLOWED_TOOLS},
            )
            copied[original.pk] = parent.pk
        fork.active_branch = parent
        fork.save(update_fields=["active_branch", "updated_at"])
        try:
            original_session = conversation.artifact_session
        except ArtifactSession.DoesNotExist:
            original_session = None
        if original_session is not None:
            branch_copy(
                branch=branch_at(session=original_session, message_id=message.pk),
                session=session,
                message_ids=copied,
            )
    return fork
