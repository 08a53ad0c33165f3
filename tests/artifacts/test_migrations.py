from importlib import import_module

import pytest
from django.apps import apps

from artifacts.models import Artifact, ArtifactVersion
from tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db


def test_titles_and_upload_names_stored_before_names_were_cleaned_are_cleaned():
    session = ConversationFactory().artifact_session
    upload = Artifact.objects.create(
        session=session,
        artifact_id="photognp.exe",
        title="photo\u202egnp.exe",
        source=Artifact.Source.USER_UPLOAD,
        metadata={"original_name": "photo\u202egnp.exe", "size": 2},
    )
    report = Artifact.objects.create(session=session, artifact_id="report", title="报告\u200f\u2066第一版\u2069")
    plan = Artifact.objects.create(session=session, artifact_id="plan", title="计划", metadata={"size": 1})
    ArtifactVersion.objects.create(artifact=upload, version=1, title="photo\u202egnp.exe", update_type="upload")
    ArtifactVersion.objects.create(artifact=report, version=1, title="报告\u200b", update_type="create")
    ArtifactVersion.objects.create(artifact=plan, version=1, title="计划", update_type="create")

    import_module("artifacts.migrations.0006_titles_cleaned").titles_clean(apps, None)

    assert {row.artifact_id: (row.title, row.metadata) for row in Artifact.objects.all()} == {
        "photognp.exe": ("photognp.exe", {"original_name": "photognp.exe", "size": 2}),
        "report": ("报告第一版", {}),
        "plan": ("计划", {"size": 1}),
    }
    assert sorted(ArtifactVersion.objects.values_list("title", flat=True)) == sorted(["photognp.exe", "报告", "计划"])
