from django.db import migrations, models

# What the engine named the results it stored before they were marked
# (agents.engine `_result_spill`): `<tool>_result_<n>`, `<agent>_report_<n>`.
SPILLED_ID = r"^[a-z_]+_(result|report)_[0-9]+$"


def spilled_results_mark(apps, schema_editor):
    Artifact = apps.get_model("artifacts", "Artifact")
    Artifact.objects.filter(artifact_id__regex=SPILLED_ID, content_type="text/xml", source="agent").update(source="run")


def spilled_results_unmark(apps, schema_editor):
    apps.get_model("artifacts", "Artifact").objects.filter(source="run").update(source="agent")


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts", "0002_version_branch"),
    ]

    operations = [
        migrations.AlterField(
            model_name="artifact",
            name="source",
            field=models.CharField(
                choices=[("agent", "Agent"), ("user_upload", "User Upload"), ("run", "Run output")],
                default="agent",
                max_length=20,
            ),
        ),
        migrations.RunPython(spilled_results_mark, spilled_results_unmark),
    ]
