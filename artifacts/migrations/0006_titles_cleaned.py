from django.db import migrations


def titles_clean(apps, schema_editor):
    """Titles and uploaded files' names stored before every name was cleaned
    (a model's create_artifact, an upload's name) lose what hides or reorders
    text, such as a right-to-left override that makes "gpj.exe" read "exe.jpg"."""
    from artifactflow.names import name_clean

    Artifact = apps.get_model("artifacts", "Artifact")
    ArtifactVersion = apps.get_model("artifacts", "ArtifactVersion")
    batch = []
    for artifact in Artifact.objects.only("pk", "title", "metadata").iterator(chunk_size=2000):
        title, metadata = name_clean(artifact.title), artifact.metadata
        if isinstance(metadata.get("original_name"), str):
            metadata = {**metadata, "original_name": name_clean(metadata["original_name"])}
        if title != artifact.title or metadata != artifact.metadata:
            artifact.title, artifact.metadata = title, metadata
            batch.append(artifact)
    Artifact.objects.bulk_update(batch, ["title", "metadata"], batch_size=500)
    batch = []
    for version in ArtifactVersion.objects.exclude(title="").only("pk", "title").iterator(chunk_size=2000):
        title = name_clean(version.title)
        if title != version.title:
            version.title = title
            batch.append(version)
    ArtifactVersion.objects.bulk_update(batch, ["title"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0005_uploads_on_every_branch")]

    operations = [migrations.RunPython(titles_clean, migrations.RunPython.noop)]
