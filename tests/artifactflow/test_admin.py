from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.test import RequestFactory
from django.urls import resolve, reverse
from django.utils import timezone

from agents.models import HttpTool, McpServer, Run, RunEvent, RunNotice, TokenBudget
from artifacts.models import Artifact, ArtifactVersion
from tests.agents.test_admin import actions_offered, view_only_staff
from tests.factories import (
    ArtifactFactory,
    ConversationFactory,
    ConversationShareFactory,
    LibraryDocumentFactory,
    MessageFactory,
    ProjectFactory,
    ProjectMemberFactory,
    RunFactory,
    ScheduleFactory,
    TokenSpendFactory,
    TokenUseFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

OUR_APPS = {"conversations", "artifacts", "agents", "audit", "retention", "projects"}


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
    TokenBudget.objects.create(user=conversation.owner, daily_tokens=1_000)
    TokenSpendFactory(user=conversation.owner, tokens=1_000)
    TokenUseFactory(user=conversation.owner)
    ConversationShareFactory(conversation=conversation, everyone=True)
    HttpTool.objects.create(
        name="findable", description="Findable", url_template="http://tickets.internal/", parameters={"type": "object"}
    )
    McpServer.objects.create(name="findable", description="Findable", url="http://mcp.internal/mcp")
    project = ProjectFactory(name="Findable")
    ProjectMemberFactory(project=project)
    ScheduleFactory(conversation=conversation, question="Findable")
    RunNotice.objects.create(run=run, user=conversation.owner)

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


# The names of the pages every ModelAdmin has; any other is a view of our own.
STANDARD_PAGES = ("changelist", "add", "history", "delete", "change")


def _our_admins():
    return [(m, ma) for m, ma in admin.site._registry.items() if m._meta.app_label in OUR_APPS]


def _rows() -> dict:
    """Every row of every model of ours, to tell that nothing changed; but the
    audit trail, which records the staff member's views."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for model in apps.get_models()
        if model._meta.app_label in OUR_APPS - {"audit"}
    }


def _something_of_everything():
    owner = UserFactory()
    conversation = ConversationFactory(owner=owner)
    finished = RunFactory(
        message=MessageFactory(conversation=conversation),
        status=Run.Status.COMPLETED,
        finished_at=timezone.now() - timedelta(days=40),
    )
    RunEvent.objects.create(run=finished, seq=1, type=RunEvent.Type.LLM_CHUNK, data={"content": "tok"})
    ArtifactFactory(session=conversation.artifact_session, artifact_id="web_fetch_result_1")
    ArtifactFactory(session=conversation.artifact_session, artifact_id="report", source=Artifact.Source.AGENT)
    queued = RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=owner)))
    RunEvent.objects.create(run=queued, seq=1, type=RunEvent.Type.METADATA)
    LibraryDocumentFactory()
    TokenBudget.objects.create(user=owner, daily_tokens=1_000)
    TokenSpendFactory(user=owner, tokens=1_000)
    TokenUseFactory(user=owner)
    ConversationShareFactory(conversation=conversation, user=UserFactory())
    project = ProjectFactory(owner=owner)
    ProjectMemberFactory(project=project)
    ScheduleFactory(conversation=ConversationFactory(owner=owner, project=project))
    RunNotice.objects.create(run=finished, user=UserFactory())
    HttpTool.objects.create(
        name="tickets", description="Tickets", url_template="http://tickets.internal/", parameters={"type": "object"}
    )
    McpServer.objects.create(name="docs", description="Docs", transport="stdio", command="/usr/bin/docs-mcp")


def _custom_pages(model_admin, obj) -> list[str]:
    """The admin's own pages; one of an object (an HTTP tool's Test connection) for `obj`."""
    opts = model_admin.opts
    standard = {f"{opts.app_label}_{opts.model_name}_{page}" for page in STANDARD_PAGES}
    return [
        reverse(f"admin:{pattern.name}", args=[obj.pk] if "object_id" in pattern.pattern.converters else [])
        for pattern in model_admin.get_urls()
        if pattern.name and pattern.name not in standard
    ]


# The admin's own pages that only read, and so open with a view permission: the audit trail's CSV.
READ_PAGES = {"audit_auditevent_export"}
# Admins that not even a view permission opens: an MCP server's command runs on the workers.
SUPERUSERS_ONLY = {McpServer}


@pytest.mark.events_by_hand
def test_staff_who_may_only_view_can_view_everything_and_change_nothing(client, admin_user):
    _something_of_everything()
    before = _rows()
    # Every action of every admin of ours, as a superuser is offered them, is tried on every changelist.
    superuser = RequestFactory().get("/")
    superuser.user = admin_user
    every_action = {name for _, model_admin in _our_admins() for name in model_admin.get_actions(superuser)}
    assert {"runs_cancel", "conversations_delete", "artifacts_cleanup", "delete_selected"} <= every_action
    client.force_login(view_only_staff())

    for model, model_admin in _our_admins():
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        if model in SUPERUSERS_ONLY:
            obj = model.objects.first()
            pages = [changelist, reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])]
            assert [client.get(url).status_code for url in pages] == [403, 403], model
            continue
        page = client.get(changelist)
        assert page.status_code == 200 and actions_offered(page) == [], changelist
        everything = [str(pk) for pk in model.objects.values_list("pk", flat=True)]
        for action in sorted(every_action):
            for confirmed in ({}, {"post": "yes", "include_all": "on"}):
                client.post(changelist, {"action": action, "_selected_action": everything, **confirmed})
        obj = model.objects.first()
        change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        assert client.get(change).status_code == 200, change
        refused = [
            client.post(reverse(f"admin:{opts.app_label}_{opts.model_name}_add"), {}),
            client.post(change, {"title": "changed", "status": "cancelled", "content": "changed"}),
            client.post(reverse(f"admin:{opts.app_label}_{opts.model_name}_delete", args=[obj.pk]), {"post": "yes"}),
        ]
        for url in _custom_pages(model_admin, obj):
            if resolve(url).url_name in READ_PAGES:
                assert client.get(url).status_code == 200, url
                assert client.post(url, {}).status_code == 405, url
                continue
            refused += [client.get(url), client.post(url, {"older_than_days": 0, "count": "1", "apply": "1"})]
        assert [response.status_code for response in refused] == [403] * len(refused), model

    assert _rows() == before
