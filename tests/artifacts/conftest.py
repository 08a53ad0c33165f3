import pytest

from agents.models import Run
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from tests.factories import ConversationFactory, MessageFactory, RunFactory


@pytest.fixture
def conversation(user):
    """A conversation of the signed-in user's, with no message yet."""
    return ConversationFactory(owner=user)


@pytest.fixture
def running(conversation):
    """A turn writing `report.md` that it has not saved yet."""
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    manager = ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk)
    manager.create(artifact_id="report.md", content="the agent's report")
    return run, manager
