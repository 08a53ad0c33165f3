import pytest
from django.contrib import admin
from django.urls import reverse

from agents.models import RunEvent
from artifacts.models import Artifact, ArtifactVersion
from tests.factories import ConversationFactory, LibraryDocumentFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

OUR_APPS = {"conversations", "artifacts", "agents"}


def test_every_model_of_ours_is_in_the_admin():
    from django.apps import apps

    ours = {m for m in apps.get_models() if m._meta.app_label in OUR_APPS}
    assert ours <= set(admin.site._registry)


@pytest.mark.events_by_hand
def test_every_changelist_and_change_page_loads_with_search(staff_client):
    conversation = ConversationFactory(title="Findable")
    run = RunFactory(message=MessageFactory(conversation=conversation))
    RunEvent.objects.create(run=run, seq=1, type=RunEvent.Type.METADATA)
    artifact = Artifact.objects.create(session=conversation.artifact_session, artifact_id="task_plan")
    ArtifactVersion.objects.create(artifact=artifact, version=1, update_type="create")
    LibraryDocumentFactory(title="Findable")

    for model in admin.site._registry:
        if model._meta.app_label not in OUR_APPS:
            continue
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        assert staff_client.get(changelist, {"q": "Findable"}).status_code == 200, changelist
        obj = model.objects.first()
        change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        assert staff_client.get(change).status_code == 200, change


def test_the_admin_is_for_staff_only(client, user):
    client.force_login(user)
    response = client.get(reverse("admin:conversations_conversation_changelist"))
    assert response.status_code == 302
