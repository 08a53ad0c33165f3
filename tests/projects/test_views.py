"""A project's pages and a conversation's project and schedule, through the
views: who may open and change what, and what each page shows."""

from datetime import time, timedelta

import lxml.html
import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from agents.models import RunNotice
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from conversations.models import Conversation
from library.models import LibraryDocument
from projects.models import Project, ProjectMember, Schedule
from tests.factories import (
    ConversationFactory,
    MessageFactory,
    ProjectFactory,
    ProjectMemberFactory,
    RunFactory,
    ScheduleFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


ITEM = "li[contains(concat(' ', @class, ' '), ' conversation-item ')]"
REPORTS = "//section[contains(@class, 'project-reports')]//ul//a"


def _page(response) -> lxml.html.HtmlElement:
    return lxml.html.fromstring(response.content.decode())


def _section(name: str) -> str:
    return f"//section[contains(@class, '{name}')]"


@pytest.fixture
def project(user):
    return ProjectFactory(owner=user, name="热泵市场", instructions="Figures first.")


def test_a_project_is_made_with_its_instructions_and_a_refusal_keeps_what_was_typed(signed_in, user):
    refused = signed_in.post(reverse("project-create"), {"name": "  ", "instructions": "给董事会写，一页。"})

    assert refused.status_code == 422
    assert "A project needs a name." in refused.content.decode()
    assert _page(refused).get_element_by_id("project-instructions").text == "给董事会写，一页。"

    made = signed_in.post(reverse("project-create"), {"name": "热泵市场", "instructions": "给董事会写，一页。"})

    project = Project.objects.get(owner=user)
    assert made.status_code == 302 and made["Location"] == project.get_absolute_url()
    assert (project.name, project.instructions) == ("热泵市场", "给董事会写，一页。")


def test_the_sidebar_lists_a_projects_conversations_under_it_and_not_under_the_dates(signed_in, user, project):
    inside = ConversationFactory(owner=user, project=project, title="In the project")
    outside = ConversationFactory(owner=user, title="Outside")

    page = _page(signed_in.get(reverse("chat")))

    entry = page.xpath(f"//li[@data-project='{project.pk}']")[0]
    assert entry.xpath(".//span[@class='project-name']")[0].text == "热泵市场"
    assert [a.get("href") for a in entry.xpath(f".//{ITEM}/a")] == [inside.get_absolute_url()]
    dated = [li.get("data-conversation") for li in page.xpath(f"//ul[@id='conversation-items']//{ITEM}")]
    assert dated == [str(outside.pk)]


def test_a_contributor_starts_a_conversation_in_the_project_and_a_reader_cannot(client, project):
    contributor = ProjectMemberFactory(project=project, role=ProjectMember.Role.CONTRIBUTOR).user
    reader = ProjectMemberFactory(project=project).user

    client.force_login(contributor)
    started = client.post(reverse("conversation-create"), {"content": "热泵价格？", "project": project.pk})
    client.force_login(reader)
    refused = client.post(reverse("conversation-create"), {"content": "热泵价格？", "project": project.pk})

    conversation = Conversation.objects.get()
    assert started.status_code == 302 and (conversation.owner, conversation.project) == (contributor, project)
    assert refused.status_code == 404 and Conversation.objects.count() == 1


def test_a_readers_project_page_offers_no_composer_upload_members_or_settings(client, user, project):
    reader = ProjectMemberFactory(project=project).user
    conversation = ConversationFactory(owner=user, project=project, title="热泵周报")
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.create(artifact_id="report", title="价格报告", content="# 价格\n\n约12万元")
    manager.flush_all()
    client.force_login(reader)

    page = _page(client.get(project.get_absolute_url()))

    assert page.xpath("//h1")[0].text == "热泵市场"
    assert [a.text for a in page.xpath(f"{_section('project-conversations')}//a")] == ["热泵周报"]
    assert [a.text for a in page.xpath(REPORTS)] == ["价格报告"]
    for absent in ("project-composer", "library-add-form", "project-settings-form", "member-form"):
        assert not page.xpath(f"//*[contains(@class, '{absent}')]"), absent
    found = _page(client.get(project.get_absolute_url(), {"q": "12万"}))
    missed = _page(client.get(project.get_absolute_url(), {"q": "锂电池"}))
    assert [a.text for a in found.xpath(REPORTS)] == ["价格报告"]
    assert not missed.xpath(REPORTS)


def test_only_the_owner_changes_shares_or_deletes_a_project(client, user, project):
    contributor = ProjectMemberFactory(project=project, role=ProjectMember.Role.CONTRIBUTOR).user
    client.force_login(contributor)

    for name, data in (
        ("project-update", {"name": "Taken over"}),
        ("project-member-add", {"username": contributor.username, "role": "contributor"}),
        ("project-delete", {}),
    ):
        assert client.post(reverse(name, args=[project.pk]), data).status_code == 404

    project.refresh_from_db()
    assert project.name == "热泵市场" and Project.objects.count() == 1


def test_the_owner_adds_and_removes_a_group_of_readers(signed_in, user, project):
    group = Group.objects.create(name="董事会")
    user.groups.add(group)

    signed_in.post(
        reverse("project-member-add", args=[project.pk]), {"audience": "group", "group": group.pk, "role": "reader"}
    )
    member = ProjectMember.objects.get(project=project)
    page = signed_in.get(project.get_absolute_url()).content.decode()
    signed_in.post(reverse("project-member-remove", args=[project.pk]), {"member": member.pk})

    assert member.group == group and member.role == "reader"
    assert "Group: 董事会" in page
    assert not ProjectMember.objects.exists()


def test_a_project_holding_documents_is_not_deleted_and_says_why(signed_in, user, project):
    LibraryDocument.objects.create(title="Notes", content="…", project=project, uploaded_by=user)

    refused = signed_in.post(reverse("project-delete", args=[project.pk]), **HTMX)

    assert refused.status_code == 200 and refused["HX-Redirect"].startswith(project.get_absolute_url())
    assert Project.objects.filter(pk=project.pk).exists()
    messages = signed_in.get(project.get_absolute_url()).content.decode()
    assert "The project still holds 1 library documents: remove them first." in messages


def test_a_project_deleted_leaves_its_conversations_to_their_owners(signed_in, user, project):
    conversation = ConversationFactory(owner=user, project=project)

    deleted = signed_in.post(reverse("project-delete", args=[project.pk]), **HTMX)

    assert deleted["HX-Redirect"] == reverse("chat")
    conversation.refresh_from_db()
    assert conversation.project is None and not Project.objects.exists()


def test_a_contributor_adds_a_document_to_the_projects_library_alone(client, project):
    contributor = ProjectMemberFactory(project=project, role=ProjectMember.Role.CONTRIBUTOR).user
    reader = ProjectMemberFactory(project=project).user
    upload = SimpleUploadedFile("热泵笔记.md", "# 热泵笔记\n\n低温下效率下降。".encode(), content_type="text/markdown")

    client.force_login(reader)
    refused = client.post(reverse("project-library-add", args=[project.pk]), {"file": upload})
    upload.seek(0)
    client.force_login(contributor)
    added = client.post(reverse("project-library-add", args=[project.pk]), {"file": upload})

    document = LibraryDocument.objects.get()
    assert refused.status_code == 404
    assert added.status_code == 302 and (document.project, document.uploaded_by) == (project, contributor)
    assert document.title == "热泵笔记.md" or document.title.startswith("热泵笔记")
    assert "热泵笔记" not in client.get(reverse("library")).content.decode()
    assert "热泵笔记" in client.get(project.get_absolute_url()).content.decode()


def test_the_owner_moves_a_conversation_into_a_project_they_contribute_to_and_out(signed_in, user, other_user):
    theirs = ProjectFactory(owner=other_user)
    ProjectMemberFactory(project=theirs, user=user, role=ProjectMember.Role.CONTRIBUTOR)
    read_only = ProjectFactory(owner=other_user)
    ProjectMemberFactory(project=read_only, user=user)
    conversation = ConversationFactory(owner=user)
    url = reverse("conversation-move", args=[conversation.pk])

    page = _page(signed_in.get(conversation.get_absolute_url()))
    offered = [option.get("value") for option in page.xpath("//select[@id='move-project']/option")]
    signed_in.post(url, {"project": read_only.pk})
    assert Conversation.objects.get(pk=conversation.pk).project is None
    signed_in.post(url, {"project": theirs.pk})
    assert Conversation.objects.get(pk=conversation.pk).project == theirs
    signed_in.post(url, {"project": ""})

    assert offered == ["", str(theirs.pk)]
    assert Conversation.objects.get(pk=conversation.pk).project is None


def test_repeat_this_research_sets_a_schedule_and_a_bad_one_keeps_what_was_typed(signed_in, user):
    conversation = ConversationFactory(owner=user)
    MessageFactory(conversation=conversation, content="本周储能电池价格？")
    url = reverse("schedule-edit", args=[conversation.pk])

    form = _page(signed_in.get(url))
    refused = signed_in.post(
        url,
        {
            "question": "本周储能电池价格？",
            "frequency": "weekly",
            "day_of_month": "1",
            "at": "07:30",
            "time_zone": "Asia/Shanghai",
        },
    )
    saved = signed_in.post(
        url,
        {
            "question": "本周储能电池价格？",
            "frequency": "weekly",
            "weekdays": ["0", "3"],
            "day_of_month": "1",
            "at": "07:30",
            "time_zone": "Asia/Shanghai",
            "allowed_tools": ["web_fetch"],
        },
    )

    assert form.get_element_by_id("id_question").text_content().strip() == "本周储能电池价格？"
    assert refused.status_code == 422 and "Choose at least one day of the week." in refused.content.decode()
    assert _page(refused).get_element_by_id("id_question").text_content().strip() == "本周储能电池价格？"
    schedule = Schedule.objects.get(conversation=conversation)
    assert saved.status_code == 302
    assert (schedule.weekdays, schedule.time, schedule.allowed_tools) == ([0, 3], time(7, 30), ["web_fetch"])
    assert schedule.next_run_at > timezone.now()
    head = signed_in.get(conversation.get_absolute_url()).content.decode()
    assert "Repeats · " in head


def test_a_schedule_is_paused_resumed_and_stopped_by_its_owner_alone(client, user, other_user):
    schedule = ScheduleFactory(conversation=ConversationFactory(owner=user))
    action = reverse("schedule-action", args=[schedule.conversation.pk])

    client.force_login(other_user)
    assert client.post(action, {"action": "pause"}).status_code == 404
    client.force_login(user)
    client.post(action, {"action": "pause"})
    paused = Schedule.objects.get(pk=schedule.pk)
    settings_page = client.get(reverse("settings")).content.decode()
    client.post(action, {"action": "resume"})
    resumed = Schedule.objects.get(pk=schedule.pk)
    client.post(action, {"action": "delete"})

    assert paused.paused_at and paused.next_run_at is None and paused.pause_reason == "Paused by its owner."
    assert "Paused by its owner." in settings_page
    assert resumed.paused_at is None and resumed.next_run_at
    assert not Schedule.objects.exists()


def test_a_reader_who_opens_a_conversation_they_were_told_of_sees_it_as_news_no_more(client, user, project):
    reader = ProjectMemberFactory(project=project).user
    conversation = ConversationFactory(owner=user, project=project)
    run = RunFactory(message=MessageFactory(conversation=conversation), status="completed")
    RunNotice.objects.create(run=run, user=reader)
    client.force_login(reader)

    before = _page(client.get(reverse("chat")))
    client.get(conversation.get_absolute_url())
    after = _page(client.get(reverse("chat")))

    assert before.get_element_by_id(f"run-mark-{conversation.pk}").get("data-mark") == "finished"
    assert after.get_element_by_id(f"run-mark-{conversation.pk}").get("data-mark") is None
    assert RunNotice.objects.get().seen_at > timezone.now() - timedelta(minutes=1)


def test_a_stranger_finds_no_project_page(client, project):
    client.force_login(UserFactory())

    assert client.get(project.get_absolute_url()).status_code == 404


def test_a_question_refused_in_a_project_stays_in_its_box_on_the_projects_page(signed_in, user, project):
    refused = signed_in.post(reverse("conversation-create"), {"content": "x" * 20_001, "project": project.pk})

    page = _page(refused)
    assert refused.status_code == 422 and not Conversation.objects.exists()
    assert page.get_element_by_id("project-question").text_content() == "x" * 20_001
    assert "A message may have at most 20,000 characters" in page.get_element_by_id("project-ask-error").text_content()


def test_a_member_by_name_leaves_the_project_and_reads_it_no_more(client, user, project):
    reader = ProjectMemberFactory(project=project).user
    conversation = ConversationFactory(owner=user, project=project)
    group = Group.objects.create(name="董事会")
    in_group = UserFactory()
    in_group.groups.add(group)
    ProjectMemberFactory(project=project, group=group, user=None)
    client.force_login(reader)

    page = _page(client.get(project.get_absolute_url()))
    left = client.post(reverse("project-leave", args=[project.pk]))

    assert page.xpath("//form[contains(@class, 'project-leave')]")
    assert left.status_code == 302 and left["Location"] == reverse("chat")
    assert client.get(conversation.get_absolute_url()).status_code == 404
    assert client.get(project.get_absolute_url()).status_code == 404
    client.force_login(in_group)
    assert not _page(client.get(project.get_absolute_url())).xpath("//form[contains(@class, 'project-leave')]")
    assert client.post(reverse("project-leave", args=[project.pk])).status_code == 302
    assert client.get(conversation.get_absolute_url()).status_code == 200
