"""A library document's project, added in place on SQLite (artifactflow.schema)."""

import django.db.models.deletion
from django.db import migrations, models

from artifactflow.schema import foreign_key_add

PROJECT = models.ForeignKey(
    blank=True,
    null=True,
    on_delete=django.db.models.deletion.PROTECT,
    related_name="documents",
    to="projects.project",
)
PROJECT.set_attributes_from_name("project")


class Migration(migrations.Migration):
    dependencies = [
        ("library", "0004_document_status"),
        ("projects", "0001_initial"),
    ]

    operations = foreign_key_add(app_label="library", model_name="librarydocument", field=PROJECT)
