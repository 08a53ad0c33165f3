"""The artifact pane at real size: its queries do not grow with the versions
of the artifact shown or with the number of artifacts listed."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import Run
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactVersion
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _with_versions(conversation, artifact_id, count):
    artifact = Artifact.objects.create(
        session=conversation.artifact_session, artifact_id=artifact_id, content=f"text v{count}", current_version=count
    )
    ArtifactVersion.objects.bulk_create(
        ArtifactVersion(artifact=artifact, version=n, content=f"text v{n}", update_type="update")
        for n in range(1, count + 1)
    )
    return artifact


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, **HTMX).status_code == 200
    return len(captured)


def test_showing_an_artifact_of_200_versions_costs_the_queries_of_one_of_2(signed_in, user, django_assert_num_queries):
    small, large = ConversationFactory(owner=user), ConversationFactory(owner=user)
    _with_versions(small, "report", 2)
    _with_versions(large, "report", 200)
    baseline = _queries(signed_in, reverse("artifact-detail", args=[small.pk, "report"]))

    with django_assert_num_queries(baseline):
        html = signed_in.get(reverse("artifact-detail", args=[large.pk, "report"]), **HTMX).content.decode()

    assert html.count('<option value="200"') == 3 and html.count('<option value="1"') == 3


def test_the_pane_of_60_artifacts_costs_the_queries_of_one_of_2(signed_in, user, django_assert_num_queries):
    small, large = ConversationFactory(owner=user), ConversationFactory(owner=user)
    for n in range(2):
        _with_versions(small, f"notes_{n}", 2)
    for n in range(60):
        _with_versions(large, f"notes_{n}", 2)
    baseline = _queries(signed_in, reverse("artifact-pane", args=[small.pk]))

    with django_assert_num_queries(baseline):
        html = signed_in.get(reverse("artifact-pane", args=[large.pk]), **HTMX).content.decode()

    assert html.count('<span class="artifact-name">') == 60


def test_the_pane_of_a_running_turn_costs_no_query_per_working_copy(signed_in, user, django_assert_max_num_queries):
    conversation = ConversationFactory(owner=user)
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    _with_versions(conversation, "report", 200)
    url = reverse("artifact-detail", args=[conversation.pk, "report"])
    baseline = _queries(signed_in, url)
    manager = ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk)
    manager.update(artifact_id="report", old_str="text v200", new_str="text in progress")
    for n in range(30):
        manager.create(artifact_id=f"draft_{n}", content=f"draft {n}")

    with django_assert_max_num_queries(baseline):
        html = signed_in.get(url, **HTMX).content.decode()

    assert "text in progress" in html and html.count("being written") == 31
