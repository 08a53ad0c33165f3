from importlib import import_module

import pytest
from django.apps import apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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


@pytest.mark.django_db(transaction=True)
def test_an_upgrade_counts_the_characters_of_every_version_saved_before_it():
    executor = MigrationExecutor(connection)
    executor.migrate([("artifacts", "0006_titles_cleaned")])
    old = executor.loader.project_state([("artifacts", "0006_titles_cleaned")]).apps
    session = ConversationFactory().artifact_session
    artifact = old.get_model("artifacts", "Artifact").objects.create(session_id=session.pk, artifact_id="报告.md")
    texts = ["", "热泵报告：寒冷地区也高效。", "x" * 70_000]
    for number, text in enumerate(texts, start=1):
        old.get_model("artifacts", "ArtifactVersion").objects.create(
            artifact=artifact, version=number, content=text, update_type="create"
        )

    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    lengths = ArtifactVersion.objects.filter(artifact_id=artifact.pk).order_by("version")
    assert list(lengths.values_list("length", flat=True)) == [0, 13, 70_000]
    # And what is saved after it, by the database too.
    saved = ArtifactVersion.objects.create(artifact_id=artifact.pk, version=4, content="第四版", update_type="update")
    saved.refresh_from_db()
    assert saved.length == 3
