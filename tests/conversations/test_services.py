import pytest
from django.core.exceptions import ValidationError

from conversations import services
from conversations.models import Conversation
from tests.factories import ConversationFactory, MessageFactory

pytestmark = pytest.mark.django_db


def test_switching_to_a_branch_shows_its_newest_leaf_without_reordering_the_list(user):
    conversation = ConversationFactory(owner=user)
    root = MessageFactory(conversation=conversation)
    old = MessageFactory(conversation=conversation, parent=root)
    old_leaf = MessageFactory(conversation=conversation, parent=old)
    MessageFactory(conversation=conversation, parent=old, content="older reply")
    newest_reply = MessageFactory(conversation=conversation, parent=old)
    other = MessageFactory(conversation=conversation, parent=root)
    conversation.active_branch = other
    conversation.save()
    updated_at = Conversation.objects.get(pk=conversation.pk).updated_at

    leaf = services.branch_switch(conversation=conversation, message=old)

    assert leaf == newest_reply != old_leaf
    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.active_branch == newest_reply and stored.updated_at == updated_at
    with pytest.raises(ValidationError):
        services.branch_switch(conversation=conversation, message=MessageFactory())


def test_switching_on_a_long_branch_takes_the_same_few_queries(user, django_assert_max_num_queries):
    conversation = ConversationFactory(owner=user)
    fork = MessageFactory(conversation=conversation)
    leaf = fork
    for _ in range(50):
        leaf = MessageFactory(conversation=conversation, parent=leaf)
    MessageFactory(conversation=conversation, parent=fork.parent)

    with django_assert_max_num_queries(3):
        switched = services.branch_switch(conversation=conversation, message=fork)

    assert switched == leaf


@pytest.mark.parametrize("title, error", [("   ", "needs a title"), ("x" * 201, "at most 200")])
def test_rename_refuses_empty_or_oversize_titles(title, error):
    conversation = ConversationFactory(title="Kept")
    with pytest.raises(ValidationError, match=error):
        services.conversation_rename(conversation=conversation, title=title)
    assert Conversation.objects.get(pk=conversation.pk).title == "Kept"


def test_rename_tidies_the_title():
    conversation = ConversationFactory()
    services.conversation_rename(conversation=conversation, title="  Heat   pumps \n")
    assert Conversation.objects.get(pk=conversation.pk).title == "Heat pumps"


def test_pinning_keeps_the_lists_order_and_unpinning_undoes_it(user):
    conversation = ConversationFactory(owner=user, title="热泵的效率")
    updated_at = Conversation.objects.get(pk=conversation.pk).updated_at

    services.conversation_pin(conversation=conversation, pinned=True)
    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.pinned_at is not None and stored.updated_at == updated_at

    services.conversation_pin(conversation=conversation, pinned=False)
    assert Conversation.objects.get(pk=conversation.pk).pinned_at is None


def test_pinning_again_keeps_when_it_was_pinned(user):
    conversation = ConversationFactory(owner=user)
    pinned_at = services.conversation_pin(conversation=conversation, pinned=True).pinned_at

    services.conversation_pin(conversation=Conversation.objects.get(pk=conversation.pk), pinned=True)

    assert Conversation.objects.get(pk=conversation.pk).pinned_at == pinned_at


def test_a_user_pins_at_most_max_pinned_and_another_users_pins_do_not_count(user, other_user):
    for _ in range(services.MAX_PINNED):
        services.conversation_pin(conversation=ConversationFactory(owner=other_user), pinned=True)
    for _ in range(services.MAX_PINNED):
        services.conversation_pin(conversation=ConversationFactory(owner=user), pinned=True)

    with pytest.raises(ValidationError):
        services.conversation_pin(conversation=ConversationFactory(owner=user), pinned=True)


def test_looking_at_a_conversation_marks_it_seen_and_tells_the_owners_pages(user, monkeypatch):
    sent = []
    monkeypatch.setattr(services.realtime, "group_send_on_commit", lambda **message: sent.append(message))
    conversation = ConversationFactory(owner=user)
    before = Conversation.objects.get(pk=conversation.pk)

    services.conversation_seen(conversation=conversation)

    after = Conversation.objects.get(pk=conversation.pk)
    assert after.seen_at > before.seen_at and after.updated_at == before.updated_at
    assert sent == [
        {"group": f"user-{user.pk}", "type": services.realtime.RUN_STATE, "conversation_id": str(conversation.pk)}
    ]
