"""Making, sharing, filling and deleting projects, and moving conversations in and out."""

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.utils import timezone

from agents.services.execution import run_execute
from artifactflow import realtime
from conversations import lifecycle
from conversations.models import Conversation
from conversations.selectors import conversation_get, conversation_viewable
from library.services import library_document_create
from projects.models import Project, ProjectMember
from projects.schedules import schedule_set
from projects.services import (
    INSTRUCTIONS_MAX_CHARS,
    conversation_move,
    member_add,
    member_remove,
    project_create,
    project_delete,
    project_update,
)
from tests.factories import ConversationFactory, ProjectFactory, ProjectMemberFactory, UserFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db

READER, CONTRIBUTOR = ProjectMember.Role.READER, ProjectMember.Role.CONTRIBUTOR


@pytest.fixture
def project(user):
    return project_create(user=user, name="热泵市场", instructions="用中文写报告，价格以人民币计。")


def _member(project, role=READER, **audience):
    return ProjectMemberFactory(project=project, role=role, **audience).user


class _Sent(list):
    """Stands in for the channel layer's publisher: what was sent to whom."""

    def send(self, group, message):
        self.append((group, message["type"]))


@pytest.fixture
def sent(monkeypatch):
    sent = _Sent()
    monkeypatch.setattr(realtime, "_publisher", lambda: sent)
    return sent


# --- Making and changing a project ----------------------------------------------------------


def test_a_project_is_made_with_its_name_and_instructions_trimmed(user):
    project = project_create(user=user, name="  热泵   市场 ", instructions="\n  只引用2024年以后的资料。\x00 \n")

    stored = Project.objects.get(pk=project.pk)
    assert (stored.owner, stored.name, stored.instructions, stored.lead_model) == (
        user,
        "热泵 市场",
        "只引用2024年以后的资料。",
        "",
    )


@pytest.mark.parametrize("name", ["", "   ", "\n\t"])
def test_a_project_needs_a_name(user, name):
    with pytest.raises(ValidationError, match="needs a name"):
        project_create(user=user, name=name)
    assert not Project.objects.exists()


def test_a_name_longer_than_its_field_is_refused(user):
    with pytest.raises(ValidationError, match="at most 200 characters"):
        project_create(user=user, name="热" * 201)
    assert project_create(user=user, name="热" * 200).name == "热" * 200


@pytest.mark.parametrize("letter", ["a", "热"])
def test_instructions_are_bounded_in_characters_whatever_the_script(user, letter):
    project = project_create(user=user, name="Bounded", instructions=letter * INSTRUCTIONS_MAX_CHARS)
    assert len(project.instructions) == INSTRUCTIONS_MAX_CHARS

    with pytest.raises(ValidationError, match=f"at most 8,000 characters; these have {INSTRUCTIONS_MAX_CHARS + 1:,}"):
        project_update(
            project=project, name="Bounded", instructions=letter * (INSTRUCTIONS_MAX_CHARS + 1), lead_model=""
        )
    assert Project.objects.get(pk=project.pk).instructions == letter * INSTRUCTIONS_MAX_CHARS


def test_an_update_changes_name_instructions_and_model(project, lead_models):
    project_update(project=project, name="Heat pumps", instructions="Cite prices in EUR.", lead_model="fast")

    stored = Project.objects.get(pk=project.pk)
    assert (stored.name, stored.instructions, stored.lead_model) == ("Heat pumps", "Cite prices in EUR.", "fast")


def test_a_default_model_must_be_one_offered(user, lead_models):
    with pytest.raises(ValidationError, match="cannot be chosen"):
        project_create(user=user, name="Heat pumps", lead_model="gpt-9")
    assert project_create(user=user, name="Heat pumps", lead_model="deep").lead_model == "deep"


def test_no_model_is_offered_without_a_models_file(user, scripted_model):
    with pytest.raises(ValidationError, match="cannot be chosen"):
        project_create(user=user, name="Heat pumps", lead_model="fast")


# --- Members -------------------------------------------------------------------------------


def test_a_person_is_added_by_username_and_their_role_changed_by_adding_again(project, user, other_user):
    member = member_add(project=project, by=user, role=READER, username=f"  {other_user.username} ")
    again = member_add(project=project, by=user, role=CONTRIBUTOR, username=other_user.username)

    assert again.pk == member.pk
    assert list(ProjectMember.objects.values_list("user", "group", "role", "created_by")) == [
        (other_user.pk, None, CONTRIBUTOR, user.pk)
    ]


def test_a_group_the_owner_is_in_is_added(project, user):
    team = Group.objects.create(name="热泵组")
    user.groups.add(team)

    member = member_add(project=project, by=user, role=READER, group_id=str(team.pk))

    assert (member.group, member.user, member.role) == (team, None, READER)


@pytest.mark.parametrize(
    "audience, message",
    [
        ({"username": "nobody"}, "No one here is called “nobody”"),
        ({"username": ""}, "No one here is called"),
        ({"group_id": "abc"}, "That group cannot be chosen here"),
        ({"group_id": "999999"}, "That group cannot be chosen here"),
    ],
)
def test_an_unknown_person_or_group_is_refused(project, user, audience, message):
    with pytest.raises(ValidationError, match=message):
        member_add(project=project, by=user, role=READER, **audience)
    assert not ProjectMember.objects.exists()


def test_a_group_the_owner_is_not_in_is_refused_unless_any_group_may_be_chosen(project, user, settings):
    others = Group.objects.create(name="Others")

    with pytest.raises(ValidationError, match="That group cannot be chosen here"):
        member_add(project=project, by=user, role=READER, group_id=str(others.pk))
    settings.SHARE_ANY_GROUP = True
    assert member_add(project=project, by=user, role=READER, group_id=str(others.pk)).group == others


def test_the_owner_an_inactive_person_and_an_unknown_role_are_refused(project, user):
    inactive = UserFactory(is_active=False)

    with pytest.raises(ValidationError, match="your own project"):
        member_add(project=project, by=user, role=READER, username=user.username)
    with pytest.raises(ValidationError, match="No one here is called"):
        member_add(project=project, by=user, role=READER, username=inactive.username)
    with pytest.raises(ValidationError, match="reader or contributor"):
        member_add(project=project, by=user, role="owner", username=UserFactory().username)
    assert not ProjectMember.objects.exists()


def test_removing_a_member_tells_the_open_pages_of_every_conversation_of_the_project(
    project, other_user, sent, django_capture_on_commit_callbacks
):
    member = ProjectMemberFactory(project=project, user=other_user)
    conversations = [ConversationFactory(owner=project.owner, project=project) for _ in range(2)]
    ConversationFactory(owner=project.owner)

    with django_capture_on_commit_callbacks(execute=True):
        assert member_remove(project=project, member_id=str(member.pk))

    assert sorted(sent) == sorted((c.group_name, realtime.SHARES_CHANGED) for c in conversations)
    assert not ProjectMember.objects.exists()


def test_leaving_a_group_that_is_a_member_tells_the_projects_pages(
    project, other_user, sent, django_capture_on_commit_callbacks
):
    team, unrelated = Group.objects.create(name="热泵组"), Group.objects.create(name="Unrelated")
    other_user.groups.add(team, unrelated)
    ProjectMemberFactory(project=project, group=team)
    conversation = ConversationFactory(owner=project.owner, project=project)

    with django_capture_on_commit_callbacks(execute=True):
        other_user.groups.remove(unrelated)
    assert sent == []
    with django_capture_on_commit_callbacks(execute=True):
        other_user.groups.remove(team)

    assert sent == [(conversation.group_name, realtime.SHARES_CHANGED)]
    assert conversation_viewable(user=other_user, conversation_id=conversation.pk) is None


@pytest.mark.parametrize("member_id", ["", "abc", "999999", None])
def test_removing_no_such_member_says_so(project, member_id):
    ProjectMemberFactory(project=project)

    assert member_remove(project=project, member_id=member_id) is False
    assert ProjectMember.objects.count() == 1


def test_a_member_of_another_project_is_not_removed_through_this_one(project):
    elsewhere = ProjectMemberFactory()

    assert member_remove(project=project, member_id=str(elsewhere.pk)) is False
    assert ProjectMember.objects.filter(pk=elsewhere.pk).exists()


# --- Conversations in and out ----------------------------------------------------------------


def test_a_contributor_moves_their_own_conversation_in_and_every_reader_reads_it(project, other_user):
    contributor = _member(project, CONTRIBUTOR)
    reader = _member(project)
    conversation = ConversationFactory(owner=contributor, title="热泵价格")
    updated_at = Conversation.objects.get(pk=conversation.pk).updated_at

    conversation_move(conversation=conversation, user=contributor, project=project)

    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.project == project
    # Moving is not news: the lists keep their order.
    assert stored.updated_at == updated_at
    for who in (project.owner, reader):
        assert conversation_viewable(user=who, conversation_id=conversation.pk) == conversation
        assert conversation_get(user=who, conversation_id=conversation.pk) is None
    assert conversation_viewable(user=other_user, conversation_id=conversation.pk) is None


def test_a_contributor_by_group_moves_their_conversation_in(project):
    team = Group.objects.create(name="写作组")
    writer = UserFactory()
    writer.groups.add(team)
    ProjectMemberFactory(project=project, group=team, role=CONTRIBUTOR)
    conversation = ConversationFactory(owner=writer)

    conversation_move(conversation=conversation, user=writer, project=project)

    assert Conversation.objects.get(pk=conversation.pk).project == project


@pytest.mark.parametrize("role", [READER, None], ids=["reader", "outsider"])
def test_a_reader_or_outsider_cannot_move_a_conversation_into_the_project(project, role):
    user = _member(project, role) if role else UserFactory()
    conversation = ConversationFactory(owner=user)

    with pytest.raises(ValidationError, match="cannot add conversations to that project"):
        conversation_move(conversation=conversation, user=user, project=project)

    assert Conversation.objects.get(pk=conversation.pk).project is None


def test_no_one_but_its_owner_moves_a_conversation(project):
    contributor = _member(project, CONTRIBUTOR)
    theirs = ConversationFactory(owner=project.owner, project=project)
    outside = ConversationFactory(owner=UserFactory())

    for conversation, user, to in (
        (theirs, contributor, None),
        (outside, contributor, project),
        (theirs, UserFactory(), None),
    ):
        with pytest.raises(ValidationError, match="Only its owner"):
            conversation_move(conversation=conversation, user=user, project=to)

    assert Conversation.objects.get(pk=theirs.pk).project == project
    assert Conversation.objects.get(pk=outside.pk).project is None


def test_moving_a_conversation_out_closes_it_to_the_readers_at_once(project, sent, django_capture_on_commit_callbacks):
    reader = _member(project)
    conversation = ConversationFactory(owner=project.owner, project=project)

    with django_capture_on_commit_callbacks(execute=True):
        conversation_move(conversation=conversation, user=project.owner, project=None)

    assert Conversation.objects.get(pk=conversation.pk).project is None
    assert conversation_viewable(user=reader, conversation_id=conversation.pk) is None
    assert sent == [(conversation.group_name, realtime.SHARES_CHANGED)]


def test_moving_a_conversation_from_one_project_to_another_closes_it_to_the_first_ones_readers(
    project, sent, django_capture_on_commit_callbacks
):
    first_reader = _member(project)
    second = ProjectFactory(owner=project.owner)
    second_reader = _member(second)
    conversation = ConversationFactory(owner=project.owner, project=project)

    with django_capture_on_commit_callbacks(execute=True):
        conversation_move(conversation=conversation, user=project.owner, project=second)

    assert conversation_viewable(user=first_reader, conversation_id=conversation.pk) is None
    assert conversation_viewable(user=second_reader, conversation_id=conversation.pk) == conversation
    assert sent == [(conversation.group_name, realtime.SHARES_CHANGED)]


def test_moving_a_conversation_in_tells_no_page(project, sent, django_capture_on_commit_callbacks):
    conversation = ConversationFactory(owner=project.owner)

    with django_capture_on_commit_callbacks(execute=True):
        conversation_move(conversation=conversation, user=project.owner, project=project)

    assert sent == []


# --- Conversations started in a project ----------------------------------------------------


def test_a_contributor_starts_a_conversation_in_the_project_and_the_owner_reads_it(project):
    contributor = _member(project, CONTRIBUTOR)

    conversation = lifecycle.conversation_start(
        user=contributor, content="热泵冬天好用吗？", project=project, enqueue=False
    )

    assert (conversation.owner, conversation.project) == (contributor, project)
    assert conversation_viewable(user=project.owner, conversation_id=conversation.pk) == conversation
    assert conversation_get(user=project.owner, conversation_id=conversation.pk) is None
    assert conversation_get(user=contributor, conversation_id=conversation.pk) == conversation


def test_a_conversation_started_in_the_project_takes_its_default_model(user, lead_models, scripted_model):
    project = project_create(user=user, name="Heat pumps", lead_model="fast")
    scripted_model.add(Text("Fast answer."))

    conversation = lifecycle.conversation_start(
        user=user, content="Heat pumps in winter?", project=project, enqueue=False
    )
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)

    assert conversation.lead_model == "fast"
    run.refresh_from_db()
    assert run.lead_model == "fast" and run.message.response == "Fast answer."
    assert scripted_model.requests[0]["model"] == "fast-model"


def test_a_model_the_person_chose_wins_over_the_projects_default(user, lead_models):
    project = project_create(user=user, name="Heat pumps", lead_model="fast")

    conversation = lifecycle.conversation_start(
        user=user, content="Heat pumps in winter?", project=project, lead_model="deep", enqueue=False
    )

    assert conversation.lead_model == "deep"


def test_a_blank_default_leaves_the_portals_model(user, lead_models):
    project = project_create(user=user, name="Heat pumps")

    conversation = lifecycle.conversation_start(
        user=user, content="Heat pumps in winter?", project=project, enqueue=False
    )

    assert conversation.lead_model == ""
    assert conversation.active_branch.runs.get().lead_model == ""


def test_a_default_the_models_file_no_longer_offers_leaves_the_portals_model(user, lead_models):
    project = project_create(user=user, name="Heat pumps", lead_model="fast")
    lead_models.write_text(lead_models.read_text().replace('choices = ["deep", "fast"]', 'choices = ["deep"]'))

    conversation = lifecycle.conversation_start(
        user=user, content="Heat pumps in winter?", project=project, enqueue=False
    )

    assert conversation.lead_model == ""


# --- Deleting a project --------------------------------------------------------------------


def test_deleting_a_project_returns_its_conversations_to_their_owners_unshared(
    project, sent, django_capture_on_commit_callbacks
):
    contributor = _member(project, CONTRIBUTOR)
    reader = _member(project)
    owners = ConversationFactory(owner=project.owner, project=project)
    contributors = ConversationFactory(owner=contributor, project=project)

    with django_capture_on_commit_callbacks(execute=True):
        project_delete(project=project)

    assert not Project.objects.exists() and not ProjectMember.objects.exists()
    assert Conversation.objects.get(pk=owners.pk).project is None
    assert conversation_get(user=contributor, conversation_id=contributors.pk) == contributors
    assert conversation_viewable(user=reader, conversation_id=owners.pk) is None
    assert conversation_viewable(user=project.owner, conversation_id=contributors.pk) is None
    assert sorted(sent) == sorted((c.group_name, realtime.SHARES_CHANGED) for c in (owners, contributors))


def test_a_project_holding_library_documents_is_not_deleted(project, user):
    conversation = ConversationFactory(owner=user, project=project)
    for title in ("热泵价格表", "Supplier list"):
        library_document_create(user=user, title=title, content="12万元", project=project)

    with pytest.raises(ValidationError, match="still holds 2 library documents"):
        project_delete(project=project)

    assert Project.objects.filter(pk=project.pk).exists()
    assert Conversation.objects.get(pk=conversation.pk).project == project


def test_a_schedule_outlives_its_projects_deletion_with_its_conversation(project, user):
    conversation = ConversationFactory(owner=user, project=project)
    schedule = schedule_set(
        conversation=conversation,
        question="本周热泵价格有何变化？",
        frequency="daily",
        at=timezone.now().time().replace(microsecond=0),
        time_zone="Asia/Shanghai",
    )

    project_delete(project=project)

    schedule.refresh_from_db()
    assert schedule.conversation.project is None and schedule.next_run_at is not None
