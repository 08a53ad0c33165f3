import pytest

from agents.models import Run
from agents.thread import thread_for_conversation, thread_page, thread_page_before
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


def _answered_chain(depth: int):
    conversation, messages = message_chain(depth)
    for message in messages:
        RunFactory(message=message, status=Run.Status.COMPLETED)
    conversation.refresh_from_db()
    return conversation, messages


def _contents(page) -> list[str]:
    return [entry.message.content for entry in page.entries]


@pytest.mark.parametrize("depth", [40, 200])
def test_a_page_is_the_newest_turns_in_the_same_queries_however_long_the_thread(
    depth, settings, django_assert_num_queries
):
    settings.THREAD_PAGE_TURNS = 20
    conversation, messages = _answered_chain(depth)
    # path, the window's messages, the branch's allowed tools, runs, the thinking of finished ones, siblings
    with django_assert_num_queries(6):
        page = thread_page(conversation=conversation)
    assert _contents(page) == [f"m{i}" for i in range(depth - 20, depth)]
    assert page.older == messages[depth - 20].pk and page.older_first == messages[depth - 40].pk


def test_older_pages_lead_back_to_the_first_turn_and_end_there(settings):
    settings.THREAD_PAGE_TURNS = 20
    conversation, messages = _answered_chain(45)
    page = thread_page(conversation=conversation)
    seen = _contents(page)
    while page.older:
        page = thread_page_before(message=messages[[m.pk for m in messages].index(page.older)])
        seen = _contents(page) + seen
    assert seen == [f"m{i}" for i in range(45)]
    assert page.older is None and page.older_first is None


def test_a_link_to_an_old_message_opens_the_page_on_it_and_runs_to_the_newest(settings):
    settings.THREAD_PAGE_TURNS = 20
    conversation, messages = _answered_chain(200)
    page = thread_page(conversation=conversation, message_id=messages[4].pk)
    assert _contents(page) == [f"m{i}" for i in range(4, 200)]
    assert page.older == messages[4].pk and page.older_first == messages[0].pk
    # A recent one, or one of another branch, changes nothing.
    elsewhere = MessageFactory(conversation=conversation, parent=messages[3], shown=False)
    for linked in (messages[195], elsewhere):
        assert _contents(thread_page(conversation=conversation, message_id=linked.pk)) == _contents(
            thread_page(conversation=conversation)
        )


def test_a_page_names_the_tools_allowed_anywhere_on_the_branch(settings):
    settings.THREAD_PAGE_TURNS = 2
    conversation, messages = _answered_chain(5)
    messages[0].metadata = {"allowed_tools": ["web_fetch"]}
    messages[0].save()
    assert thread_page(conversation=conversation).allowed_tools == ["web_fetch"]
