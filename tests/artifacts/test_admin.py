import pytest
from django.urls import reverse

from artifacts import services
from artifacts.models import Artifact
from tests.agents.test_admin import _text

pytestmark = pytest.mark.django_db


def test_the_admin_deletes_artifacts_through_the_service_that_refuses_one_being_written(
    staff_client, conversation, running
):
    _, manager = running
    manager.flush_all()
    manager.rewrite(artifact_id="report.md", content="still writing")
    manager.create(artifact_id="notes", content="done")
    manager.flush_all()
    manager.rewrite(artifact_id="report.md", content="still writing more")
    report, notes = Artifact.objects.get(artifact_id="report.md"), Artifact.objects.get(artifact_id="notes")

    page = staff_client.post(reverse("admin:artifacts_artifact_delete", args=[report.pk]), {"post": "yes"}, follow=True)
    assert services.ARTIFACT_BEING_WRITTEN in _text(page)
    response = staff_client.post(
        reverse("admin:artifacts_artifact_changelist"),
        {"action": "delete_selected", "_selected_action": [report.pk, notes.pk], "post": "yes"},
        follow=True,
    )
    assert list(Artifact.objects.values_list("artifact_id", flat=True)) == ["report.md"]
    assert any(str(m).startswith("report.md was kept") for m in response.context["messages"])
