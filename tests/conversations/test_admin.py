import lxml.html
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from agents.models import Run
from artifacts.models import Artifact
from conversations.lifecycle import conversation_fork
from conversations.models import Conversation, ConversationShare
from tests.agents.test_admin import _text, actions_offered, staff_with
from tests.factories import (
    ArtifactFactory,
    ConversationFactory,
    MessageFactory,
    RunFactory,
)

pytestmark = pytest.mark.django_db

User = get_user_model()


def test_a_conversation_added_here_has_its_artifact_session(staff_client, user):
    inline = {
        "messages-TOTAL_FORMS": 0,
        "messages-INITIAL_FORMS": 0,
        "shares-TOTAL_FORMS": 0,
        "shares-INITIAL_FORMS": 0,
    }
    staff_client.post(reverse("admin:conversations_conversation_add"), {"owner": user.pk, "title": "By hand", **inline})

    assert Conversation.objects.get().artifact_session


def test_deleting_conversations_refuses_busy_ones(staff_client, user):
    idle = ConversationFactory(owner=user, title="Idle one")
    RunFactory(message=MessageFactory(conversation=idle), status=Run.Status.COMPLETED)
    ArtifactFactory(session=idle.artifact_session)
    busy = ConversationFactory(owner=user, title="Busy one")
    RunFactory(message=MessageFactory(conversation=busy), status=Run.Status.RUNNING)
    url = reverse("admin:conversations_conversation_changelist")
    selection = {"action": "conversations_delete", "_selected_action": [idle.pk, busy.pk]}

    confirm = staff_client.post(url, selection)
    assert "Idle one" in _text(confirm) and Conversation.objects.count() == 2

    response = staff_client.post(url, {**selection, "post": "yes"}, follow=True)
    assert list(Conversation.objects.values_list("title", flat=True)) == ["Busy one"]
    assert not Artifact.objects.filter(session_id=idle.pk).exists()
    assert "Not deleted, Busy one: A turn is still in progress" in _text(response)
    assert "delete_selected" not in staff_client.get(url).text


def test_deleting_a_conversation_from_its_page_is_refused_while_busy(staff_client, user):
    busy = ConversationFactory(owner=user)
    RunFactory(message=MessageFactory(conversation=busy), status=Run.Status.WAITING_PERMISSION)
    response = staff_client.post(
        reverse("admin:conversations_conversation_delete", args=[busy.pk]), {"post": "yes"}, follow=True
    )
    assert Conversation.objects.filter(pk=busy.pk).exists()
    assert "A turn is still in progress" in _text(response)

    idle = ConversationFactory(owner=user)
    RunFactory(message=MessageFactory(conversation=idle), status=Run.Status.COMPLETED)
    staff_client.post(reverse("admin:conversations_conversation_delete", args=[idle.pk]), {"post": "yes"})
    assert not Conversation.objects.filter(pk=idle.pk).exists()


def test_the_cleanup_dry_run_lists_what_it_would_remove_then_removes_exactly_that(staff_client, user):
    conversation = ConversationFactory(owner=user)
    spilled = ArtifactFactory(session=conversation.artifact_session, artifact_id="web_fetch_result_1")
    report = ArtifactFactory(
        session=conversation.artifact_session, artifact_id="report", source=Artifact.Source.AGENT, content="# Report"
    )
    busy = ConversationFactory(owner=user)
    RunFactory(message=MessageFactory(conversation=busy), status=Run.Status.RUNNING)
    ArtifactFactory(session=busy.artifact_session, artifact_id="web_fetch_result_1")
    url = reverse("admin:conversations_conversation_changelist")
    selection = {"action": "artifacts_cleanup", "_selected_action": [conversation.pk, busy.pk]}

    dry = lxml.html.fromstring(staff_client.post(url, selection).content)
    listed = dry.xpath("//tbody/tr/td[2]/text()")
    assert listed == ["web_fetch_result_1"] and Artifact.objects.count() == 3
    assert str(busy.pk) in " ".join(dry.xpath("//h2[.='Refused']/following-sibling::ul[1]//text()"))
    wider = lxml.html.fromstring(staff_client.post(url, {**selection, "include_all": "on"}).content)
    assert sorted(wider.xpath("//tbody/tr/td[2]/text()")) == ["report", "web_fetch_result_1"]

    staff_client.post(url, {**selection, "post": "yes"})
    assert not Artifact.objects.filter(pk=spilled.pk).exists()
    assert Artifact.objects.filter(pk=report.pk).exists()
    assert Artifact.objects.filter(session=busy.artifact_session).exists()


def test_the_cleanup_needs_the_permission_to_delete_artifacts_and_deleting_conversations_their_own(client, user):
    conversation = ConversationFactory(owner=user)
    spilled = ArtifactFactory(session=conversation.artifact_session, artifact_id="web_fetch_result_1")
    url = reverse("admin:conversations_conversation_changelist")
    cleanup = {"action": "artifacts_cleanup", "_selected_action": [conversation.pk], "post": "yes"}

    client.force_login(staff_with("conversations.view_conversation", "conversations.delete_conversation"))
    assert actions_offered(client.get(url)) == ["conversations_delete"]
    client.post(url, cleanup)
    assert Artifact.objects.filter(pk=spilled.pk).exists()

    client.force_login(staff_with("conversations.view_conversation", "artifacts.delete_artifact"))
    assert actions_offered(client.get(url)) == ["artifacts_cleanup"]
    client.post(url, {"action": "conversations_delete", "_selected_action": [conversation.pk], "post": "yes"})
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    client.post(url, cleanup)
    assert not Artifact.objects.filter(pk=spilled.pk).exists()


def test_forks_are_listed_with_where_they_came_from(staff_client, user, other_user):
    original = ConversationFactory(owner=user, title="原始研究")
    message = MessageFactory(conversation=original, response="答。")
    fork = conversation_fork(user=other_user, conversation=original, message=message)
    Conversation.objects.filter(pk=fork.pk).update(title="Forked copy")

    listing = staff_client.get(reverse("admin:conversations_conversation_changelist"), {"forked_from__isempty": "0"})

    rows = lxml.html.fromstring(listing.content.decode()).xpath("//table[@id='result_list']/tbody/tr")
    assert [row.xpath("th/a")[0].text_content() for row in rows] == ["Forked copy"]
    assert "原始研究" in rows[0].text_content()
    change = staff_client.get(reverse("admin:conversations_conversation_change", args=[fork.pk])).content.decode()
    assert "原始研究" in change


def test_shares_are_added_inline_on_the_conversation_and_listed_on_their_own(staff_client, user, other_user):
    conversation = ConversationFactory(owner=user, title="共享的对话")
    team = Group.objects.create(name="研究组")
    form = {
        "owner": user.pk,
        "title": conversation.title,
        "messages-TOTAL_FORMS": 0,
        "messages-INITIAL_FORMS": 0,
        "shares-TOTAL_FORMS": 3,
        "shares-INITIAL_FORMS": 0,
        "shares-0-user": other_user.pk,
        "shares-1-group": team.pk,
        "shares-2-everyone": "on",
        # One audience only: refused on the form, not by the database.
    }
    response = staff_client.post(reverse("admin:conversations_conversation_change", args=[conversation.pk]), form)
    assert response.status_code == 302
    shares = ConversationShare.objects.filter(conversation=conversation)
    assert shares.count() == 3 and {share.created_by for share in shares} == {User.objects.get(is_staff=True)}

    refused = staff_client.post(
        reverse("admin:conversations_conversation_change", args=[conversation.pk]),
        {**form, "shares-TOTAL_FORMS": 1, "shares-0-group": team.pk, "shares-0-everyone": ""},
    )
    assert refused.status_code == 200 and ConversationShare.objects.count() == 3

    listing = staff_client.get(reverse("admin:conversations_conversationshare_changelist")).content.decode()
    assert "共享的对话" in listing and "everyone signed in" in listing and "group 研究组" in listing
