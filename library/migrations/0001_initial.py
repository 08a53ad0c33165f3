"""The team library leaves agents for an app of its own. Its table, search
index and triggers (agents' migrations 0003, 0004, 0009 and 0014) stay as they
are, under the name agents_librarydocument: only Django's record of which app
the model belongs to moves, and the model's content type with it, so the
permissions staff were given on documents and the admin's history of them
follow."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def content_type_move(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="agents", model="librarydocument"
    ).update(app_label="library")


def content_type_move_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.using(schema_editor.connection.alias).filter(
        app_label="library", model="librarydocument"
    ).update(app_label="agents")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("agents", "0018_http_secret_origin"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="LibraryDocument",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("title", models.CharField(max_length=300)),
                        ("content", models.TextField()),
                        ("original_file", models.FileField(blank=True, upload_to="library/")),
                        ("content_type", models.CharField(default="text/markdown", max_length=100)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "group",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="auth.group",
                                verbose_name="visible to group",
                            ),
                        ),
                        (
                            "uploaded_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"db_table": "agents_librarydocument", "ordering": ["title", "id"]},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_type_move, content_type_move_back),
    ]
