"""Who may read, contribute to and change a project, and so read its conversations."""

import pytest
from django.contrib.auth.models import AnonymousUser, Group

from conversations.selectors import conversation_get, conversation_viewable
from projects.access import (
    project_contributes,
    project_owned,
    project_readable,
    project_viewable,
)
from projects.models import Project, ProjectMember
from projects.services import member_remove
from tests.factories import (
    ConversationFactory,
    ConversationShareFactory,
    ProjectFactory,
    ProjectMemberFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

CONTRIBUTOR = ProjectMember.Role.CONTRIBUTOR


@pytest.fixture
def team():
    """A project with a reader by name, a group 热泵组 as readers, a contributor
    by name, and a conversation of the owner's and of the contributor's in it."""
    project = ProjectFactory(name="热泵市场")
    group = Group.objects.create(name="热泵组")
    in_group = UserFactory()
    in_group.groups.add(group)
    contributor = UserFactory()
    return {
        "project": project,
        "owner": project.owner,
        "reader": ProjectMemberFactory(project=project).user,
        "group": group,
        "in_group": in_group,
        "group_member": ProjectMemberFactory(project=project, group=group),
        "contributor": ProjectMemberFactory(project=project, user=contributor, role=CONTRIBUTOR).user,
        "outsider": UserFactory(),
        "owners": ConversationFactory(owner=project.owner, project=project),
        "contributors": ConversationFactory(owner=contributor, project=project),
        "elsewhere": ConversationFactory(owner=project.owner),
    }


def _readable(user):
    return set(Project.objects.filter(project_readable(user=user)))


def test_the_owner_members_by_name_and_by_group_read_the_project_and_no_one_else(team):
    project = team["project"]

    for who in ("owner", "reader", "in_group", "contributor"):
        assert _readable(team[who]) == {project}, who
        assert project_viewable(user=team[who], project_id=project.pk) == project, who
    assert _readable(team["outsider"]) == set()
    assert project_viewable(user=team["outsider"], project_id=project.pk) is None
    assert _readable(AnonymousUser()) == set()


@pytest.mark.parametrize("project_id", ["abc", None, "", 10**9, "1 OR 1=1"])
def test_a_malformed_or_unknown_project_id_is_no_project(team, project_id):
    assert project_viewable(user=team["owner"], project_id=project_id) is None
    assert project_owned(user=team["owner"], project_id=project_id) is None


def test_a_member_of_two_groups_in_the_project_reads_it_once(team):
    second = Group.objects.create(name="Heat pumps")
    team["in_group"].groups.add(second)
    ProjectMemberFactory(project=team["project"], group=second, role=CONTRIBUTOR)

    assert list(Project.objects.filter(project_readable(user=team["in_group"]))) == [team["project"]]


def test_only_the_owner_owns_the_project(team):
    project = team["project"]

    assert project_owned(user=team["owner"], project_id=project.pk) == project
    for who in ("reader", "in_group", "contributor", "outsider"):
        assert project_owned(user=team[who], project_id=project.pk) is None, who


def test_the_owner_and_contributors_by_name_or_group_contribute_and_readers_do_not(team):
    project = team["project"]
    contributing_group = Group.objects.create(name="写作组")
    writer = UserFactory()
    writer.groups.add(contributing_group)
    ProjectMemberFactory(project=project, group=contributing_group, role=CONTRIBUTOR)

    assert project_contributes(user=team["owner"], project=project)
    assert project_contributes(user=team["contributor"], project=project)
    assert project_contributes(user=writer, project=project)
    assert not project_contributes(user=team["reader"], project=project)
    assert not project_contributes(user=team["in_group"], project=project)
    assert not project_contributes(user=team["outsider"], project=project)
    assert not project_contributes(user=AnonymousUser(), project=project)


@pytest.mark.parametrize("who", ["owner", "reader", "in_group", "contributor"])
def test_every_member_reads_every_conversation_in_the_project_and_writes_only_their_own(team, who):
    user = team[who]

    for conversation in (team["owners"], team["contributors"]):
        assert conversation_viewable(user=user, conversation_id=conversation.pk) == conversation
        # Writes find their conversation with conversation_get: its owner's alone.
        expected = conversation if conversation.owner_id == user.pk else None
        assert conversation_get(user=user, conversation_id=conversation.pk) == expected


def test_the_owners_conversations_outside_the_project_stay_the_owners(team):
    for who in ("reader", "in_group", "contributor", "outsider"):
        assert conversation_viewable(user=team[who], conversation_id=team["elsewhere"].pk) is None, who
    assert conversation_viewable(user=team["owner"], conversation_id=team["elsewhere"].pk) == team["elsewhere"]


def test_an_outsider_reads_no_conversation_of_the_project(team):
    for conversation in (team["owners"], team["contributors"]):
        assert conversation_viewable(user=team["outsider"], conversation_id=conversation.pk) is None
        assert conversation_viewable(user=AnonymousUser(), conversation_id=conversation.pk) is None


def test_a_member_of_another_project_reads_none_of_this_ones(team):
    other = ProjectFactory()
    member = ProjectMemberFactory(project=other).user
    ConversationFactory(owner=other.owner, project=other)

    assert _readable(member) == {other}
    assert conversation_viewable(user=member, conversation_id=team["owners"].pk) is None


def test_a_member_taken_out_reads_the_projects_conversations_no_more(team):
    project, reader = team["project"], team["reader"]
    membership = ProjectMember.objects.get(project=project, user=reader)

    assert member_remove(project=project, member_id=str(membership.pk))

    assert conversation_viewable(user=reader, conversation_id=team["owners"].pk) is None
    assert project_viewable(user=reader, project_id=project.pk) is None


@pytest.mark.parametrize(
    "leave",
    [
        lambda user, group: user.groups.remove(group),
        lambda user, group: group.user_set.remove(user),
        lambda user, group: user.groups.clear(),
        lambda user, group: group.user_set.clear(),
    ],
    ids=["leaves", "is-removed", "leaves-every-group", "group-emptied"],
)
def test_someone_who_leaves_the_group_reads_the_projects_conversations_no_more(team, leave):
    user = team["in_group"]

    leave(user, team["group"])

    assert conversation_viewable(user=user, conversation_id=team["contributors"].pk) is None
    assert project_viewable(user=user, project_id=team["project"].pk) is None
    # The others keep theirs.
    assert conversation_viewable(user=team["reader"], conversation_id=team["contributors"].pk) is not None


def test_a_conversation_shared_by_name_stays_readable_when_its_reader_leaves_the_project(team):
    ConversationShareFactory(conversation=team["owners"], user=team["reader"])
    membership = ProjectMember.objects.get(project=team["project"], user=team["reader"])

    # As a URL's <id:…> hands it over, a number.
    assert member_remove(project=team["project"], member_id=membership.pk)

    assert conversation_viewable(user=team["reader"], conversation_id=team["owners"].pk) == team["owners"]
    assert conversation_viewable(user=team["reader"], conversation_id=team["contributors"].pk) is None


# Deleting a group or a person deletes their memberships with them; the audit
# records each membership deleted by its name (ProjectMember.__str__), which
# must not need the group or the person, deleted by then.
def test_a_group_deleted_takes_its_membership_and_its_members_reading_with_it(team):
    team["group"].delete()

    assert not ProjectMember.objects.filter(project=team["project"], group__isnull=False).exists()
    assert conversation_viewable(user=team["in_group"], conversation_id=team["owners"].pk) is None


def test_a_member_deleted_takes_their_membership_with_them(team):
    team["reader"].delete()

    assert list(ProjectMember.objects.filter(project=team["project"]).values_list("user", "group")) == [
        (None, team["group"].pk),
        (team["contributor"].pk, None),
    ]
