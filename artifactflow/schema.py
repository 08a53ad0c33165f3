"""Adding a nullable foreign key to a table a SQLite view reads, in place.

Django's AddField rebuilds a SQLite table for a foreign key (copy, drop,
rename), which the full-text views over conversations and library documents
forbid; SQLite's own ALTER TABLE … ADD COLUMN adds a nullable reference in
place. Other databases take Django's AddField as it is."""

from django.db import migrations


def foreign_key_add(*, app_label: str, model_name: str, field) -> list[migrations.operations.base.Operation]:
    """The operations adding nullable foreign key `field` (named) to the model."""
    name = field.name

    def forwards(apps, schema_editor):
        model = apps.get_model(app_label, model_name)
        added = model._meta.get_field(name)
        if schema_editor.connection.vendor != "sqlite":
            schema_editor.add_field(model, added)
            return
        table = model._meta.db_table
        target = added.related_model._meta
        column = added.column
        schema_editor.execute(
            f'ALTER TABLE "{table}" ADD COLUMN "{column}" bigint NULL '
            f'REFERENCES "{target.db_table}" ("{target.pk.column}") DEFERRABLE INITIALLY DEFERRED'
        )
        schema_editor.execute(f'CREATE INDEX "{table}_{column}_idx" ON "{table}" ("{column}")')

    def backwards(apps, schema_editor):
        model = apps.get_model(app_label, model_name)
        removed = model._meta.get_field(name)
        if schema_editor.connection.vendor != "sqlite":
            schema_editor.remove_field(model, removed)
            return
        table = model._meta.db_table
        schema_editor.execute(f'DROP INDEX IF EXISTS "{table}_{removed.column}_idx"')
        schema_editor.execute(f'ALTER TABLE "{table}" DROP COLUMN "{removed.column}"')

    # The state first, so the function sees the model with its new field.
    return [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddField(model_name=model_name, name=name, field=field.clone())]
        ),
        migrations.RunPython(forwards, backwards),
    ]
