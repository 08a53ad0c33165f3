import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_upgrade_drops_the_tables_and_record_of_the_database_channel_layer_it_replaces():
    executor = MigrationExecutor(connection)
    executor.migrate([("live", None)])
    # As channels-lite left them in a portal that ran it.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE channels_lite_event (id integer PRIMARY KEY, channel_name varchar(100))")
        cursor.execute("CREATE TABLE channels_lite_groupmembership (id integer PRIMARY KEY, group_name varchar(100))")
        cursor.execute("INSERT INTO channels_lite_event VALUES (1, 'specific.x!y')")
    MigrationRecorder(connection).record_applied("channels_lite", "0001_initial")

    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    tables = set(connection.introspection.table_names())
    assert not {"channels_lite_event", "channels_lite_groupmembership"} & tables
    assert not MigrationRecorder(connection).migration_qs.filter(app="channels_lite").exists()
    assert "conversations_message" in tables
