"""The embedded default's channel layer kept its messages in the database
(channels-lite) until live.layer replaced it: its tables go, and the record
of its migrations with them."""

from django.db import migrations

TABLES = ("channels_lite_event", "channels_lite_groupmembership")


def channels_lite_drop(apps, schema_editor):
    connection = schema_editor.connection
    existing = set(connection.introspection.table_names())
    for table in TABLES:
        if table in existing:
            schema_editor.execute(f"DROP TABLE {schema_editor.quote_name(table)}")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = %s", ["channels_lite"])


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [migrations.RunPython(channels_lite_drop, migrations.RunPython.noop, elidable=True)]
