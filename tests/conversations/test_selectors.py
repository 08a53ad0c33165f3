from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.auth.models import AnonymousUser, Group
from django.utils import timezone

from conversations import selectors
from conversations.models import Conversation
from conversations.tree import message_path
from tests.factories import ConversationFactory, ConversationShareFactory, MessageFactory, UserFactory, message_chain

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("depth", [3, 300])
def test_the_path_to_root_is_one_query_whatever_the_depth(depth, django_assert_num_queries):
    _, messages = message_chain(depth)
    with django_assert_num_queries(1):
        path = message_path(message_id=messages[-1].pk)
    assert [m.pk for m in path] == [m.pk for m in messages]


def test_the_path_of_a_branch_leaves_out_its_siblings():
    conversation, (root, a1, a2) = message_chain(3)
    b1 = MessageFactory(conversation=conversation, parent=root)
    b2 = MessageFactory(conversation=conversation, parent=b1)

    assert message_path(message_id=b2.pk) == [root, b1, b2]
    assert message_path(message_id=a2.pk) == [root, a1, a2]
    assert message_path(message_id=root.pk) == [root]


def test_conversations_are_scoped_to_their_owner(user, other_user):
    mine = ConversationFactory(owner=user)
    ConversationFactory(owner=other_user)

    assert list(selectors.conversation_list(user=user)) == [mine]
    assert selectors.conversation_get(user=user, conversation_id=mine.pk) == mine
    assert selectors.conversation_get(user=other_user, conversation_id=mine.pk) is None
    assert selectors.conversation_get(user=user, conversation_id="not-a-uuid") is None


def test_search_finds_titles_questions_and_answers_of_my_conversations_only(user, other_user):
    by_title = ConversationFactory(owner=user, title="Heat pumps in winter")
    by_answer = ConversationFactory(owner=user, title="Other")
    MessageFactory(conversation=by_answer, content="Tell me", response="A heat PUMP moves heat.")
    ConversationFactory(owner=user, title="Unrelated")
    theirs = ConversationFactory(owner=other_user, title="heat pump")

    found = set(selectors.conversation_list(user=user, query="  heat pump "))

    assert found == {by_title, by_answer}
    assert theirs not in found


def _conversations(user, count: int, *, tied: int = 0) -> list:
    """`count` conversations a second apart, newest first; the newest `tied` share one moment."""
    now = timezone.now()
    conversations = Conversation.objects.bulk_create(Conversation(owner=user, title=f"c{i}") for i in range(count))
    for i, conversation in enumerate(conversations):
        conversation.updated_at = now if i < tied else now - timedelta(seconds=i)
    Conversation.objects.bulk_update(conversations, ["updated_at"])
    return conversations


def test_the_list_pages_newest_first_without_repeats_or_gaps_when_times_tie(user, other_user):
    _conversations(user, 120, tied=70)
    _conversations(other_user, 60)

    pages = [selectors.conversation_list(user=user)]
    while pages[-1].next_cursor:
        pages.append(selectors.conversation_list(user=user, before=pages[-1].next_cursor))

    assert [len(page.items) for page in pages] == [50, 50, 20]
    newest_first = Conversation.objects.filter(owner=user).order_by("-updated_at", "-id")
    assert [c.pk for page in pages for c in page] == [c.pk for c in newest_first]


def test_a_page_is_one_query_for_only_what_the_list_shows(user, django_assert_num_queries):
    _conversations(user, 1000)
    cursor = selectors.conversation_list(user=user).next_cursor
    with django_assert_num_queries(1):
        page = selectors.conversation_list(user=user, before=cursor)
    assert len(page.items) == selectors.PAGE_SIZE and page.next_cursor
    assert {"metadata", "active_branch_id", "created_at"} <= page.items[0].get_deferred_fields()


@pytest.mark.parametrize("cursor", ["", "nonsense", "12_not-a-uuid", "9" * 40 + "_" + "0" * 32, "1_" + "g" * 32])
def test_a_malformed_cursor_gives_the_first_page(user, cursor):
    newest = _conversations(user, 3)[0]
    assert selectors.conversation_list(user=user, before=cursor).items[0] == newest


TODAY = date(2026, 10, 15)


@pytest.mark.parametrize(
    ("moment", "heading"),
    [
        (datetime(2026, 10, 15, 0, 30, tzinfo=UTC), ("today", "Today")),
        # Another machine's clock a little ahead.
        (datetime(2026, 10, 16, 8, 0, tzinfo=UTC), ("today", "Today")),
        (datetime(2026, 10, 14, 23, 59, tzinfo=UTC), ("yesterday", "Yesterday")),
        (datetime(2026, 10, 13, 12, 0, tzinfo=UTC), ("previous-7-days", "Previous 7 days")),
        (datetime(2026, 10, 8, 0, 0, tzinfo=UTC), ("previous-7-days", "Previous 7 days")),
        (datetime(2026, 10, 7, 23, 59, tzinfo=UTC), ("previous-30-days", "Previous 30 days")),
        (datetime(2026, 9, 15, 0, 0, tzinfo=UTC), ("previous-30-days", "Previous 30 days")),
        (datetime(2026, 9, 14, 23, 59, tzinfo=UTC), ("2026-09", "September")),
        (datetime(2026, 1, 1, 0, 0, tzinfo=UTC), ("2026-01", "January")),
        (datetime(2025, 12, 31, 23, 59, tzinfo=UTC), ("2025-12", "December 2025")),
    ],
)
def test_a_conversation_goes_under_the_heading_of_its_days_age(moment, heading):
    assert selectors.date_heading(moment=moment, today=TODAY) == heading


def test_days_are_counted_in_the_active_time_zone():
    # 23:00 on the 14th in New York, 01:00 on the 15th in Kiritimati (UTC+14).
    new_york_night = datetime(2026, 10, 15, 3, 0, tzinfo=UTC)
    kiritimati_morning = datetime(2026, 10, 14, 11, 0, tzinfo=UTC)

    assert selectors.date_heading(moment=new_york_night, today=TODAY)[1] == "Today"
    with timezone.override("America/New_York"):
        assert selectors.date_heading(moment=new_york_night, today=TODAY)[1] == "Yesterday"
    assert selectors.date_heading(moment=kiritimati_morning, today=TODAY)[1] == "Yesterday"
    with timezone.override("Pacific/Kiritimati"):
        assert selectors.date_heading(moment=kiritimati_morning, today=TODAY)[1] == "Today"


def _spread(user, count: int, *, step: timedelta) -> list:
    """`count` conversations `step` apart from now back, newest first."""
    now = timezone.now()
    conversations = Conversation.objects.bulk_create(Conversation(owner=user, title=f"c{i}") for i in range(count))
    for i, conversation in enumerate(conversations):
        conversation.updated_at = now - i * step
    Conversation.objects.bulk_update(conversations, ["updated_at"])
    return conversations


def expected_label(moment, today: date) -> str:
    """The heading the list should show over a conversation last updated at `moment`."""
    day = timezone.localtime(moment).date()
    age = (today - day).days
    if age == 0:
        return "Today"
    if age == 1:
        return "Yesterday"
    if age <= 7:
        return "Previous 7 days"
    if age <= 30:
        return "Previous 30 days"
    return day.strftime("%B" if day.year == today.year else "%B %Y")


def test_a_thousand_conversations_page_under_their_headings_each_shown_once(
    user, other_user, settings, django_assert_num_queries
):
    # A zone far from UTC, so a day here is not a day in UTC.
    settings.TIME_ZONE = "Pacific/Kiritimati"
    # Ten hours apart: today to more than a year back.
    conversations = _spread(user, 1000, step=timedelta(hours=10))
    _spread(other_user, 30, step=timedelta(days=20))

    pages = []
    cursor = ""
    while not pages or cursor:
        with django_assert_num_queries(1):
            pages.append(selectors.conversation_list(user=user, before=cursor))
        cursor = pages[-1].next_cursor

    today = timezone.localdate()
    assert len(pages) == 20
    headings, shown = [], []
    for number, page in enumerate(pages):
        ended_in = pages[number - 1].groups[-1].key if number else None
        assert [group.continued for group in page.groups] == [page.groups[0].key == ended_in] + [False] * (
            len(page.groups) - 1
        )
        headings += [group.label for group in page.groups if not group.continued]
        for group in page.groups:
            assert {expected_label(c.updated_at, today) for c in group.items} == {group.label}
            shown += group.items
    assert [c.pk for c in shown] == [c.pk for c in conversations]
    assert len(headings) == len(set(headings))
    assert headings[:4] == ["Today", "Yesterday", "Previous 7 days", "Previous 30 days"]
    assert len(headings) >= 16 and f"{today.year - 1}" in headings[-1]


def test_a_conversation_is_viewable_by_its_owner_and_those_it_is_shared_with_in_one_query(
    user, other_user, django_assert_num_queries
):
    team = Group.objects.create(name="研究组")
    member, stranger = UserFactory(), UserFactory()
    member.groups.add(team)
    by_name = ConversationFactory(owner=user, title="热泵报告")
    by_group = ConversationFactory(owner=user)
    for_everyone = ConversationFactory(owner=user)
    private = ConversationFactory(owner=user)
    ConversationShareFactory(conversation=by_name, user=other_user)
    ConversationShareFactory(conversation=by_group, group=team)
    ConversationShareFactory(conversation=for_everyone, everyone=True)

    with django_assert_num_queries(1):
        found = selectors.conversation_viewable(user=other_user, conversation_id=by_name.pk)
        assert found.owner == user
    viewable = {
        who.username: {
            c.pk
            for c in (by_name, by_group, for_everyone, private)
            if selectors.conversation_viewable(user=who, conversation_id=c.pk)
        }
        for who in (user, other_user, member, stranger)
    }
    assert viewable == {
        user.username: {by_name.pk, by_group.pk, for_everyone.pk, private.pk},
        other_user.username: {by_name.pk, for_everyone.pk},
        member.username: {by_group.pk, for_everyone.pk},
        stranger.username: {for_everyone.pk},
    }
    # Writes keep to the owner: a share gives nothing to conversation_get.
    assert selectors.conversation_get(user=other_user, conversation_id=by_name.pk) is None
    assert selectors.conversation_viewable(user=AnonymousUser(), conversation_id=for_everyone.pk) is None
    assert selectors.conversation_viewable(user=other_user, conversation_id="not-a-uuid") is None


def test_leaving_the_group_or_a_revoked_share_takes_the_conversation_away(user, other_user):
    team = Group.objects.create(name="Team")
    other_user.groups.add(team)
    conversation = ConversationFactory(owner=user)
    ConversationShareFactory(conversation=conversation, group=team)
    share = ConversationShareFactory(conversation=conversation, user=other_user)

    share.delete()
    assert selectors.conversation_viewable(user=other_user, conversation_id=conversation.pk) == conversation
    other_user.groups.remove(team)
    assert selectors.conversation_viewable(user=other_user, conversation_id=conversation.pk) is None


def test_shared_with_me_lists_other_peoples_conversations_once_newest_first(user, other_user):
    team = Group.objects.create(name="Team")
    other_user.groups.add(team)
    older = ConversationFactory(owner=user, title="较早的")
    newer = ConversationFactory(owner=user, title="较新的")
    # Shared twice over (by name and by group): listed once.
    ConversationShareFactory(conversation=older, user=other_user)
    ConversationShareFactory(conversation=older, group=team)
    ConversationShareFactory(conversation=newer, everyone=True)
    ConversationFactory(owner=user)
    ConversationFactory(owner=other_user)
    Conversation.objects.filter(pk=newer.pk).update(updated_at=timezone.now() + timedelta(minutes=1))

    assert selectors.conversations_shared_with(user=other_user) == [newer, older]
    # What others shared with everyone; never the user's own.
    assert selectors.conversations_shared_with(user=user) == []
    assert selectors.conversations_shared_with(user=AnonymousUser()) == []


def test_a_conversations_shares_list_everyone_first(user, other_user):
    conversation = ConversationFactory(owner=user)
    team = Group.objects.create(name="Team")
    by_name = ConversationShareFactory(conversation=conversation, user=other_user)
    by_group = ConversationShareFactory(conversation=conversation, group=team)
    everyone = ConversationShareFactory(conversation=conversation, everyone=True)
    ConversationShareFactory(everyone=True)

    assert selectors.conversation_shares(conversation=conversation) == [everyone, by_name, by_group]


def _pinned(conversation):
    Conversation.objects.filter(pk=conversation.pk).update(pinned_at=timezone.now())
    return conversation


def test_pinned_conversations_are_listed_apart_and_pages_of_the_rest_stay_whole(user, other_user):
    now = timezone.now()
    conversations = [ConversationFactory(owner=user, title=f"第{i}个") for i in range(7)]
    for i, conversation in enumerate(conversations):
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(minutes=i))
    pinned = [_pinned(conversations[1]), _pinned(conversations[4])]
    _pinned(ConversationFactory(owner=other_user))

    first = selectors.conversation_list(user=user, limit=3)
    second = selectors.conversation_list(user=user, limit=3, before=first.next_cursor)

    rest = [c.pk for c in conversations if c not in pinned]
    assert [c.pk for c in first] + [c.pk for c in second] == rest and not second.next_cursor
    # The last pinned first; another user's never.
    assert [c.pk for c in selectors.conversation_pinned(user=user)] == [pinned[1].pk, pinned[0].pk]


def test_a_search_finds_pinned_conversations_among_the_rest(user):
    _pinned(ConversationFactory(owner=user, title="热泵 pinned"))
    ConversationFactory(owner=user, title="热泵 not pinned")

    found = selectors.conversation_list(user=user, query="热泵")

    assert sorted(c.title for c in found) == ["热泵 not pinned", "热泵 pinned"]
