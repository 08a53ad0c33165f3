import pytest

from agents.models import Run
from agents.thread import thread_for_conversation
from tests.factories import ConversationFactory, MessageFactory, RunFactory, message_chain

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("depth", [3, 300])
def test_the_thread_takes_a_constant_number_of_queries(depth, django_assert_num_queries):
    conversation, messages = message_chain(depth)
    for message in messages[:-1]:
        RunFactory(message=message, status=Run.Status.COMPLETED)
    RunFactory(message=messages[-1], status=Run.Status.RUNNING)
    conversation.active_branch = messages[-1]
    conversation.save()
    conversation.refresh_from_db()
    # path, runs, events of unfinished runs, the thinking of finished ones, siblings
    with django_assert_num_queries(5):
        entries = thread_for_conversation(conversation=conversation)
    assert [e.view.status for e in entries] == ["completed"] * (depth - 1) + ["running"]


def test_each_entry_knows_its_siblings_for_the_switcher(user):
    conversation = ConversationFactory(owner=user)
    first_root = MessageFactory(conversation=conversation)
    second_root = MessageFactory(conversation=conversation)
    child = MessageFactory(conversation=conversation, parent=second_root)
    conversation.active_branch = child
    conversation.save()

    root_entry, child_entry = thread_for_conversation(conversation=conversation)

    assert root_entry.siblings == [first_root.pk, second_root.pk]
    assert (root_entry.position, root_entry.previous_sibling, root_entry.next_sibling) == (2, first_root.pk, None)
    assert child_entry.siblings == [child.pk] and child_entry.next_sibling is None
