import pytest

from tests.factories import ConversationFactory


@pytest.fixture
def conversation(user):
    """A conversation of the signed-in user's, with no message yet."""
    return ConversationFactory(owner=user)
