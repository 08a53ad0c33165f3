"""What users do to artifacts: upload beside a running turn, and delete."""

import re

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from agents.models import Run
from agents.selectors import branch_shown_live
from artifacts import selectors, services
from artifacts.branches import branch_shown
from artifacts.models import Artifact, ArtifactVersion
from tests.artifacts.test_views import HTMX, _flushed
from tests.factories import MessageFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("cache_lost", [False, True])
def test_an_upload_named_like_an_artifact_the_turn_is_writing_gets_a_suffix(
    conversation, running, media_root, cache_lost
):
    run, manager = running
    # What the worker saves after each step; with the cache gone, it is what says so.
    Run.objects.filter(pk=run.pk).update(checkpoint={"artifacts": manager.working_state()})
    if cache_lost:
        cache.clear()

    upload = services.artifact_upload(
        branch=branch_shown_live(conversation=conversation),
        filename="report.md",
        data=b"# Mine",
    )
    manager.flush_all()

    assert upload.artifact_id == "report_1.md"
    assert Artifact.objects.get(artifact_id="report.md").content == "the agent's report"
    assert Artifact.objects.get(artifact_id="report_1.md").content == "# Mine"


def test_delete_asks_first_then_takes_every_version_on_every_branch(signed_in, conversation):
    MessageFactory(conversation=conversation)
    _flushed(conversation, "notes", "v1", "v2")
    MessageFactory(conversation=conversation, parent=None)
    _flushed(conversation, "notes", "v3 on the edited question's branch")
    url = reverse("artifact-delete", args=[conversation.pk, "notes"])

    asked = signed_in.get(url, **HTMX).content.decode()
    assert "Delete “notes”?" in asked
    assert "Its 3 versions go too, 2 of them on other branches of this conversation." in asked
    assert Artifact.objects.filter(artifact_id="notes").exists()

    done = signed_in.post(url, **HTMX)
    assert done.status_code == 200 and "Deleted notes." in done.content.decode()
    assert not Artifact.objects.exists() and not ArtifactVersion.objects.exists()


def test_delete_removes_an_uploaded_file_from_storage(
    signed_in, conversation, media_root, django_capture_on_commit_callbacks
):
    upload = services.artifact_upload(
        branch=branch_shown(conversation=conversation), filename="chart.png", data=b"\x89PNG\r\n\x1a\n"
    )
    stored = media_root / upload.file.name
    assert stored.exists()

    with django_capture_on_commit_callbacks(execute=True):
        signed_in.post(reverse("artifact-delete", args=[conversation.pk, "chart.png"]), **HTMX)

    assert not stored.exists()


def test_delete_is_refused_while_a_turn_writes_the_artifact(signed_in, conversation, running):
    _, manager = running
    manager.flush_all()
    manager.rewrite(artifact_id="report.md", content="still writing")

    refused = signed_in.post(reverse("artifact-delete", args=[conversation.pk, "report.md"]), **HTMX)

    assert refused.status_code == 409
    assert services.ARTIFACT_BEING_WRITTEN in refused.content.decode()
    assert Artifact.objects.filter(artifact_id="report.md").exists()


def test_delete_needs_a_post_with_csrf_and_another_users_artifact_is_a_404(user, other_user, conversation):
    _flushed(conversation, "notes", "v1")
    url = reverse("artifact-delete", args=[conversation.pk, "notes"])
    theirs = Client()
    theirs.force_login(other_user)
    mine = Client(enforce_csrf_checks=True)
    mine.force_login(user)

    assert theirs.post(url).status_code == 404 and theirs.get(url).status_code == 404
    assert mine.post(url).status_code == 403
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', mine.get(url).content.decode())[1]
    assert mine.post(url, {"csrfmiddlewaretoken": token}).status_code == 200
    assert not Artifact.objects.exists()


def test_deleting_an_upload_from_another_branch_counts_only_its_edits_there_as_lost(
    signed_in, conversation, media_root, django_capture_on_commit_callbacks
):
    asked = MessageFactory(conversation=conversation, content="第一问")
    first = branch_shown(conversation=conversation)
    upload = services.artifact_upload(branch=first, filename="notes.md", data="# 笔记".encode())
    services.artifact_edit(branch=first, artifact=upload, content="# 笔记\n\n我的补充", base_version=1)
    MessageFactory(conversation=conversation, parent=None, content="第一问，改过")
    other = branch_shown(conversation=conversation)

    assert selectors.artifact_delete_scope(artifact=upload, branch=other) == selectors.DeleteScope(
        versions=2, elsewhere=1
    )
    first_scope = selectors.artifact_delete_scope(artifact=upload, branch=first)
    assert first_scope == selectors.DeleteScope(versions=2, elsewhere=0) and first.path == (asked.pk,)
    stored = media_root / upload.file.name
    with django_capture_on_commit_callbacks(execute=True):
        signed_in.post(reverse("artifact-delete", args=[conversation.pk, "notes.md"]), **HTMX)
    assert not Artifact.objects.exists() and not ArtifactVersion.objects.exists() and not stored.exists()
