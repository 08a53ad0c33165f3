"""A conversation's project, added in place on SQLite (artifactflow.schema)."""

import django.db.models.deletion
from django.db import migrations, models

from artifactflow.schema import foreign_key_add

PROJECT = models.ForeignKey(
    blank=True,
    null=True,
    on_delete=django.db.models.deletion.SET_NULL,
    related_name="conversations",
    to="projects.project",
)
PROJECT.set_attributes_from_name("project")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0011_retention_hold"),
        ("projects", "0001_initial"),
    ]

    operations = foreign_key_add(app_label="conversations", model_name="conversation", field=PROJECT)
