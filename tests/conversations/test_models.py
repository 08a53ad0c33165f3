import pytest

from agents.models import Run, RunEvent
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


def test_deleting_a_conversation_deletes_its_messages_runs_and_artifacts():
    conversation = ConversationFactory()
    run = RunFactory(message=MessageFactory(conversation=conversation))
    RunEvent.objects.create(run=run, seq=1, type=RunEvent.Type.METADATA)
    artifact = Artifact.objects.create(session=conversation.artifact_session, artifact_id="task_plan")
    ArtifactVersion.objects.create(artifact=artifact, version=1, content="- [ ] plan", update_type="create")
    conversation.active_branch = run.message
    conversation.save()

    conversation.delete()

    for model in (ArtifactSession, Artifact, ArtifactVersion, Run, RunEvent):
        assert not model.objects.exists(), model


def test_the_artifact_session_shares_the_conversation_id():
    conversation = ConversationFactory()
    assert conversation.artifact_session.pk == conversation.pk
