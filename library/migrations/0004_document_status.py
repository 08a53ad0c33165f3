"""A document's status: queued while a worker reads its text (added with
others, library.services.library_documents_queue), indexed, or failed with
why. On SQLite the columns are added in place: Django would rebuild the table
for a column with a default, which the full-text view over it
(agents_librarydocument_search, agents' migration 0009) forbids."""

from django.db import migrations, models

STATUS = models.CharField(
    choices=[("queued", "queued"), ("indexed", "indexed"), ("failed", "failed")],
    default="indexed",
    max_length=10,
    verbose_name="status",
)
ERROR = models.TextField(blank=True, verbose_name="why it failed")


def columns_add(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            "ALTER TABLE agents_librarydocument ADD COLUMN status varchar(10) NOT NULL DEFAULT 'indexed'"
        )
        schema_editor.execute("ALTER TABLE agents_librarydocument ADD COLUMN error text NOT NULL DEFAULT ''")
        return
    model = apps.get_model("library", "LibraryDocument")
    for name, field in (("status", STATUS.clone()), ("error", ERROR.clone())):
        field.set_attributes_from_name(name)
        schema_editor.add_field(model, field)


def columns_remove(apps, schema_editor):
    for column in ("error", "status"):
        schema_editor.execute(f"ALTER TABLE agents_librarydocument DROP COLUMN {column}")


class Migration(migrations.Migration):
    dependencies = [
        ("library", "0003_web_snapshots"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(model_name="librarydocument", name="status", field=STATUS),
                migrations.AddField(model_name="librarydocument", name="error", field=ERROR),
            ],
            database_operations=[migrations.RunPython(columns_add, columns_remove)],
        ),
    ]
