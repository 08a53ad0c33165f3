from django.db import migrations, models


def column_add(apps, schema_editor):
    # ALTER TABLE … ADD COLUMN, which SQLite does in place: Django's AddField
    # rebuilds the table there, under the search views of migration 0004.
    kind = "boolean" if schema_editor.connection.vendor == "postgresql" else "bool"
    schema_editor.execute(
        f"ALTER TABLE conversations_conversation ADD COLUMN retention_hold {kind} DEFAULT false NOT NULL"
    )


def column_drop(apps, schema_editor):
    schema_editor.execute("ALTER TABLE conversations_conversation DROP COLUMN retention_hold")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0010_answer_stored_once"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(column_add, column_drop)],
            state_operations=[
                migrations.AddField(
                    model_name="conversation",
                    name="retention_hold",
                    field=models.BooleanField(
                        db_default=False,
                        default=False,
                        help_text="No retention policy removes this conversation or its uploads.",
                        verbose_name="on hold",
                    ),
                ),
            ],
        ),
    ]
