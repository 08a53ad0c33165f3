import pytest

from artifacts import services
from artifacts.branches import branch_shown
from tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db


def test_deleting_a_conversation_removes_its_uploaded_files(media_root, django_capture_on_commit_callbacks):
    conversation = ConversationFactory()
    with django_capture_on_commit_callbacks(execute=True):
        artifact = services.artifact_upload(
            branch=branch_shown(conversation=conversation),
            filename="chart.png",
            data=b"\x89PNG\r\n\x1a\n" + b"\x00" * 8,
        )
    stored = media_root / artifact.file.name
    assert stored.exists()

    with django_capture_on_commit_callbacks(execute=True):
        conversation.delete()

    assert not stored.exists()
