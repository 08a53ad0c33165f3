from django.db import migrations


def uploads_unbranch(apps, schema_editor):
    """An upload's first version was recorded at the message the page showed,
    so a branch made by editing an earlier question lost the file. Uploads are
    the user's material on every branch now: their first versions lose the
    message. Later versions (people's edits, an agent's changes) stay on their
    branch."""
    ArtifactVersion = apps.get_model("artifacts", "ArtifactVersion")
    ArtifactVersion.objects.filter(
        artifact__source="user_upload", update_type="upload", version=1, message__isnull=False
    ).update(message=None)


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0004_metadata_validated")]

    # Which message an upload was made at is not kept: nothing to undo to.
    operations = [migrations.RunPython(uploads_unbranch, migrations.RunPython.noop)]
