"""A conversation's life as a person lives it: started with a question,
asked in (each question queues the turn that answers it), forked from a branch
into a conversation of one's own, and deleted once no turn is writing to it.
These steps drive the engine and the artifacts, so they sit above both: the
conversations app's models, tree and selectors stay below the engine, its
workflow and pages above it (the layer contract in pyproject.toml)."""

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.db import transaction
from django.utils.translation import gettext

from agents.llm.config import lead_choices_from_settings
from agents.models import Run
from agents.selectors import ALLOWED_TOOLS
from agents.services.runs import RunStateError, run_create
from artifactflow.names import name_line, name_shortened
from artifacts.branches import branch_at
from artifacts.models import ArtifactSession
from artifacts.services import branch_copy
from audit.models import AuditEvent
from audit.services import audit_record
from library.services import snapshots_copy

from .models import Conversation, Message
from .tree import message_path

MAX_MESSAGE_LENGTH = 20_000
TITLE_LENGTH = 80
# The metadata key a fork keeps its origin under, said on its page.
FORKED_FROM = "forked_from"

# Passed as `parent` to continue the branch the user is looking at.
ACTIVE_BRANCH = object()


def conversation_start(
    *, user, content: str, lead_model: str | None = None, project=None, enqueue: bool = True
) -> Conversation:
    """A new conversation (with its artifact session) that opens with `content`,
    in `project` if given (one the user contributes to: the caller's check),
    whose default model it takes unless the person chose one."""
    if project is not None and lead_model is None and project.lead_model:
        # A default the models file no longer offers leaves the portal's.
        lead_model = project.lead_model if _lead_model_offered(project.lead_model) else None
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=user, project=project)
        ArtifactSession.objects.create(conversation=conversation)
        message_post(conversation=conversation, content=content, lead_model=lead_model, enqueue=enqueue)
    return conversation


def _title_from(content: str) -> str:
    return name_shortened(name_line(content), limit=TITLE_LENGTH)


def message_post(
    *,
    conversation: Conversation,
    content: str,
    parent=ACTIVE_BRANCH,
    lead_model: str | None = None,
    enqueue: bool = True,
    schedule=None,
) -> Message:
    """Store a user message and a queued run for it; the turn starts once committed.

    `parent` is ACTIVE_BRANCH (continue what the user sees), a message of this
    conversation (branch there) or None (a new root). The new message becomes
    the active branch. `lead_model` is the lead's model the person chose, one
    of the models file's [lead] choices, kept for the conversation's turns
    from this one on (blank: the default); None keeps the conversation's.
    A `schedule` asks it (projects.schedules): its turn runs unattended.
    """
    content = content.strip()
    if not content:
        raise ValidationError(gettext("Write a message first."))
    # Postgres cannot store a NUL character: say so rather than fail.
    ProhibitNullCharactersValidator()(content)
    if len(content) > MAX_MESSAGE_LENGTH:
        raise ValidationError(
            gettext(
                "A message may have at most %(max)s characters; this one has %(length)s. "
                "Shorten it, or upload the long part as a file."
            )
            % {"max": f"{MAX_MESSAGE_LENGTH:,}", "length": f"{len(content):,}"}
        )
    if lead_model is not None:
        lead_model_check(lead_model)
    if parent is ACTIVE_BRANCH:
        parent = conversation.active_branch
    elif parent is not None and parent.conversation_id != conversation.pk:
        raise ValidationError(gettext("That message belongs to another conversation."))

    try:
        with transaction.atomic():
            if lead_model is not None:
                # Before the run, which takes its lead model from the conversation.
                conversation.lead_model = lead_model
            message = Message.objects.create(conversation=conversation, parent=parent, content=content)
            run_create(message=message, enqueue=enqueue, schedule=schedule)
            conversation.active_branch = message
            if not conversation.title:
                conversation.title = _title_from(content)
            conversation.save(update_fields=["active_branch", "title", "lead_model", "updated_at"])
    except RunStateError as exc:
        # Another turn here, or today's token budget spent: the composer keeps the draft.
        raise ValidationError(str(exc)) from None
    return message


def _lead_model_offered(name: str) -> bool:
    choices, _ = lead_choices_from_settings()
    return name in {choice.name for choice in choices}


def lead_model_check(name: str) -> None:
    """Only a model of the list: a crafted request naming another is refused."""
    if name and not _lead_model_offered(name):
        raise ValidationError(gettext("That model cannot be chosen here. Choose one from the list."))


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
                gettext("A turn is still in progress here. Stop it, and delete the conversation once it has ended.")
            )
        conversation.delete()


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
                metadata={key: value for key, value in original.metadata.items() if key != ALLOWED_TOOLS},
            )
            copied[original.pk] = parent.pk
        fork.active_branch = parent
        fork.save(update_fields=["active_branch", "updated_at"])
        try:
            original_session = conversation.artifact_session
        except ArtifactSession.DoesNotExist:
            original_session = None
        # The copied answers' citations open the pages as they were read.
        snapshots_copy(source=conversation, conversation=fork)
        if original_session is not None:
            branch_copy(
                branch=branch_at(session=original_session, message_id=message.pk),
                session=session,
                message_ids=copied,
            )
        if conversation.owner_id != user.pk:
            audit_record(
                action=AuditEvent.Action.FORK,
                obj=conversation,
                detail={"owner": conversation.owner.get_username(), "message": message.pk, "fork": fork.pk},
            )
    return fork
