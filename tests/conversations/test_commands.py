"""The `delete_conversation` command, on real rows and real files."""

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from agents.models import Run, RunEvent
from artifacts import services
from artifacts.branches import branch_shown
from artifacts.cleanup import SESSION_ACTIVE
from artifacts.models import Artifact, ArtifactVersion
from conversations.models import Conversation, Message
from tests.factories import ArtifactFactory, ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


def _call(*args):
    out = StringIO()
    call_command("delete_conversation", *args, stdout=out)
    return out.getvalue()


def _counts():
    return [model.objects.count() for model in (Conversation, Message, Run, RunEvent, Artifact, ArtifactVersion)]


@pytest.fixture
def finished(user):
    """A conversation of two answered questions, a stored result and an upload."""
    conversation = ConversationFactory(owner=user, title="Heat pumps")
    first = MessageFactory(conversation=conversation)
    RunFactory(message=first, status=Run.Status.COMPLETED)
    RunFactory(message=MessageFactory(conversation=conversation, parent=first), status=Run.Status.FAILED)
    ArtifactFactory(session=conversation.artifact_session, content="日本" * 100)
    upload = services.artifact_upload(
        branch=branch_shown(conversation=conversation), filename="plot.png", data=b"\0" * 1000
    )
    return conversation, upload


def test_a_dry_run_says_what_would_go_and_changes_nothing(finished, user, media_root):
    conversation, upload = finished
    before = _counts()

    output = _call(str(conversation.pk))

    assert _counts() == before and (media_root / upload.file.name).exists()
    assert output.splitlines() == [
        (
            f"Would delete conversation {conversation.pk} (Heat pumps) of {user.username}: "
            "2 messages, 2 runs, 2 artifacts, 2.1 KB (2200 bytes)."
        ),
        "Dry run: nothing was deleted. Run again with --apply to delete it.",
    ]


def test_apply_deletes_the_conversation_with_everything_in_it_and_the_files(
    finished, media_root, django_capture_on_commit_callbacks
):
    conversation, upload = finished
    other = ConversationFactory()
    ArtifactFactory(session=other.artifact_session)

    with django_capture_on_commit_callbacks(execute=True):
        output = _call(str(conversation.pk), "--apply")

    assert output.startswith(f"Deleted conversation {conversation.pk} (Heat pumps)")
    assert list(Conversation.objects.all()) == [other]
    assert Message.objects.count() == Run.objects.count() == 0
    assert list(Artifact.objects.values_list("session_id", flat=True)) == [other.pk]
    assert not (media_root / upload.file.name).exists()


@pytest.mark.parametrize("status", Run.ACTIVE_STATUSES)
@pytest.mark.parametrize("apply", [False, True])
def test_a_conversation_with_a_turn_in_progress_is_refused(finished, status, apply):
    conversation, _ = finished
    RunFactory(message=MessageFactory(conversation=conversation), status=status)
    before = _counts()
    # With --apply the reason is the service's, which checks under a lock.
    reason = "A turn is still in progress here." if apply else SESSION_ACTIVE

    with pytest.raises(CommandError, match=re.escape(reason)):
        _call(str(conversation.pk), *(["--apply"] if apply else []))

    assert _counts() == before


@pytest.mark.parametrize(
    "conversation_id, message",
    [
        ("'; DELETE FROM conversations_conversation; --", "is not a conversation id (a UUID)."),
        ("4d1b3c2a-0000-4000-8000-000000000000", "There is no conversation 4d1b3c2a-0000-4000-8000-000000000000."),
    ],
)
def test_an_id_that_names_no_conversation_is_an_error(finished, conversation_id, message):
    before = _counts()

    with pytest.raises(CommandError, match=re.escape(message)):
        _call(conversation_id, "--apply")

    assert _counts() == before
