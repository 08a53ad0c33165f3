import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from artifactflow import realtime
from conversations import selectors, services
from conversations.models import Conversation, ConversationShare
from tests.factories import ConversationFactory, ConversationShareFactory, MessageFactory, UserFactory

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


def test_a_renamed_title_keeps_nothing_that_hides_or_reorders_text():
    conversation = ConversationFactory(title="Kept")

    # Would read "热泵报告fdp.exe" with the override.
    services.conversation_rename(conversation=conversation, title="热泵报告\u202eexe.pdf\u200f\u2066\u200b\x01")

    assert Conversation.objects.get(pk=conversation.pk).title == "热泵报告exe.pdf"
    with pytest.raises(ValidationError, match="needs a title"):
        services.conversation_rename(conversation=conversation, title="\u202e\u200b\x00 \ufeff")
    assert Conversation.objects.get(pk=conversation.pk).title == "热泵报告exe.pdf"


def test_sharing_with_a_user_by_name_once_however_often_it_is_asked(user, other_user):
    conversation = ConversationFactory(owner=user)

    first = services.share_with_user(conversation=conversation, by=user, username=f" {other_user.username} ")
    again = services.share_with_user(conversation=conversation, by=user, username=other_user.username)

    assert first == again and first.user == other_user and first.created_by == user
    assert ConversationShare.objects.filter(conversation=conversation).count() == 1


@pytest.mark.parametrize("name", ["nobody", "", "不存在的人", "inactive", "owner"])
def test_sharing_with_no_one_or_oneself_is_refused(user, name):
    UserFactory(username="inactive", is_active=False)
    conversation = ConversationFactory(owner=user)
    with pytest.raises(ValidationError):
        services.share_with_user(
            conversation=conversation, by=user, username=user.username if name == "owner" else name
        )
    assert not ConversationShare.objects.exists()


def test_sharing_with_a_group_and_with_everyone_and_stopping(user):
    conversation = ConversationFactory(owner=user)
    team = Group.objects.create(name="研究组")
    user.groups.add(team)

    by_group = services.share_with_group(conversation=conversation, by=user, group_id=str(team.pk))
    services.share_with_everyone(conversation=conversation, by=user, on=True)
    services.share_with_everyone(conversation=conversation, by=user, on=True)
    assert by_group.group == team
    assert ConversationShare.objects.filter(conversation=conversation, everyone=True).count() == 1

    services.share_with_everyone(conversation=conversation, by=user, on=False)
    services.share_with_everyone(conversation=conversation, by=user, on=False)
    assert list(ConversationShare.objects.filter(conversation=conversation)) == [by_group]
    for group_id in ("", None, "x", str(team.pk + 1)):
        with pytest.raises(ValidationError):
            services.share_with_group(conversation=conversation, by=user, group_id=group_id)


def test_a_person_shares_only_with_the_groups_they_are_in(user, other_user):
    conversation = ConversationFactory(owner=user)
    mine, theirs = Group.objects.create(name="我的组"), Group.objects.create(name="别人的组")
    user.groups.add(mine)
    other_user.groups.add(theirs)

    assert list(selectors.share_groups(user=user)) == [mine]
    with pytest.raises(ValidationError, match="That group cannot be chosen here"):
        services.share_with_group(conversation=conversation, by=user, group_id=str(theirs.pk))
    assert not ConversationShare.objects.exists()
    assert services.share_with_group(conversation=conversation, by=user, group_id=str(mine.pk)).group == mine


def test_with_share_any_group_a_person_shares_with_every_group(user, other_user, settings):
    settings.SHARE_ANY_GROUP = True
    conversation = ConversationFactory(owner=user)
    theirs = Group.objects.create(name="别人的组")
    other_user.groups.add(theirs)

    assert list(selectors.share_groups(user=user)) == [theirs]
    assert services.share_with_group(conversation=conversation, by=user, group_id=str(theirs.pk)).group == theirs


def test_a_share_with_a_group_its_owner_left_keeps_letting_its_members_in(user, other_user):
    # As an admin may have shared it, or the owner while still in the group: leaving it revokes nothing.
    conversation = ConversationFactory(owner=user)
    team = Group.objects.create(name="研究组")
    user.groups.add(team)
    other_user.groups.add(team)
    services.share_with_group(conversation=conversation, by=user, group_id=str(team.pk))

    user.groups.remove(team)

    assert selectors.conversation_viewable(user=other_user, conversation_id=conversation.pk) == conversation
    assert [share.group for share in selectors.conversation_shares(conversation=conversation)] == [team]


def test_a_share_is_removed_only_from_its_own_conversation(user, other_user):
    conversation = ConversationFactory(owner=user)
    share = ConversationShareFactory(conversation=conversation, user=other_user)
    elsewhere = ConversationShareFactory(user=other_user)

    assert not services.share_remove(conversation=conversation, share_id=elsewhere.pk)
    assert services.share_remove(conversation=conversation, share_id=share.pk)
    assert not services.share_remove(conversation=conversation, share_id=share.pk)
    assert list(ConversationShare.objects.all()) == [elsewhere]


def test_a_share_is_one_audience_and_never_twice(user, other_user):
    conversation = ConversationFactory(owner=user)
    team = Group.objects.create(name="Team")
    ConversationShareFactory(conversation=conversation, user=other_user)
    for audience in (
        {"user": other_user},
        {"user": None, "group": None, "everyone": False},
        {"user": other_user, "group": team},
        {"user": None, "group": team, "everyone": True},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            ConversationShare.objects.create(conversation=conversation, **audience)


class _Sent(list):
    """Stands in for the channel layer's publisher: what was sent to whom."""

    def send(self, group, message):
        self.append((group, message["type"]))


def test_revoking_or_leaving_a_group_tells_the_pages_to_check_after_commit(
    user, other_user, django_capture_on_commit_callbacks, monkeypatch
):
    sent = _Sent()
    monkeypatch.setattr(realtime, "_publisher", lambda: sent)
    conversation = ConversationFactory(owner=user)
    by_group = ConversationFactory(owner=user)
    team, unshared = Group.objects.create(name="研究组"), Group.objects.create(name="Unshared")
    other_user.groups.add(team, unshared)
    share = ConversationShareFactory(conversation=conversation, user=other_user)
    ConversationShareFactory(conversation=by_group, group=team)

    with django_capture_on_commit_callbacks(execute=True):
        services.share_remove(conversation=conversation, share_id=share.pk)
    with django_capture_on_commit_callbacks(execute=True):
        other_user.groups.remove(unshared)
    with django_capture_on_commit_callbacks(execute=True):
        other_user.groups.remove(team)
    with django_capture_on_commit_callbacks(execute=True):
        team.user_set.add(other_user)
        other_user.groups.clear()
    with django_capture_on_commit_callbacks(execute=True):
        team.user_set.add(other_user)
        team.user_set.clear()

    # Only the conversation's pages are told: leaving a group nothing is shared with tells no one.
    assert (
        sent
        == [(conversation.group_name, realtime.SHARES_CHANGED)] + [(by_group.group_name, realtime.SHARES_CHANGED)] * 3
    )


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
