import pytest

from conversations import selectors
from agents.models import Run
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


def _chain(depth):
    conversation = ConversationFactory()
    parent = None
    messages = []
    for i in range(depth):
        parent = MessageFactory(conversation=conversation, parent=parent, content=f"m{i}")
        messages.append(parent)
    return conversation, messages


@pytest.mark.parametrize("depth", [3, 300])
def test_the_path_to_root_is_one_query_whatever_the_depth(depth, django_assert_num_queries):
    _, messages = _chain(depth)
    with django_assert_num_queries(1):
        path = selectors.message_path(message_id=messages[-1].pk)
    assert [m.pk for m in path] == [m.pk for m in messages]


def test_the_path_of_a_branch_leaves_out_its_siblings():
    conversation, (root, a1, a2) = _chain(3)
    b1 = MessageFactory(conversation=conversation, parent=root)
    b2 = MessageFactory(conversation=conversation, parent=b1)

    assert selectors.message_path(message_id=b2.pk) == [root, b1, b2]
    assert selectors.message_path(message_id=a2.pk) == [root, a1, a2]
    assert selectors.message_path(message_id=root.pk) == [root]


@pytest.mark.parametrize("depth", [3, 300])
def test_the_thread_takes_a_constant_number_of_queries(depth, django_assert_num_queries):
    conversation, messages = _chain(depth)
    for message in messages[:-1]:
        RunFactory(message=message, status=Run.Status.COMPLETED)
    RunFactory(message=messages[-1], status=Run.Status.RUNNING)
    conversation.active_branch = messages[-1]
    conversation.save()
    conversation.refresh_from_db()
    # path, runs, events of unfinished runs
    with django_assert_num_queries(3):
        entries = selectors.thread_for_conversation(conversation=conversation)
    assert [e.view.status for e in entries] == ["completed"] * (depth - 1) + ["running"]


def test_conversations_are_scoped_to_their_owner(user, other_user):
    mine = ConversationFactory(owner=user)
    ConversationFactory(owner=other_user)

    assert list(selectors.conversation_list(user=user)) == [mine]
    assert selectors.conversation_get(user=user, conversation_id=mine.pk) == mine
    assert selectors.conversation_get(user=other_user, conversation_id=mine.pk) is None
    assert selectors.conversation_get(user=user, conversation_id="not-a-uuid") is None
