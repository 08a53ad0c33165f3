"""Paths through the conversation tree. A module of its own, with no import
of the app's other modules, so that the artifacts' branch views can use it
while the agents' modules import them."""

from django.db import connection

from .models import Message

# The ORM has no recursive CTE; this one walks up the parent links from the
# leaf and is the same SQL on SQLite and Postgres.
_PATH = """
    WITH RECURSIVE path(id, depth) AS (
        SELECT id, 0 FROM {table} WHERE id = %s
        UNION ALL
        SELECT m.parent_id, path.depth + 1 FROM {table} m
        JOIN path ON m.id = path.id WHERE m.parent_id IS NOT NULL
    )
"""


def message_path(*, message_id: int) -> list[Message]:
    """The messages from the root down to this one, in one query whatever the depth."""
    table = Message._meta.db_table
    sql = (
        _PATH.format(table=table)
        + f"SELECT {table}.* FROM {table} JOIN path ON {table}.id = path.id ORDER BY path.depth DESC"
    )
    return list(Message.objects.raw(sql, [message_id]))


def message_path_ids(*, message_id: int | None) -> list[int]:
    """The ids of `message_path`, without reading the messages; [] for None."""
    if message_id is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            _PATH.format(table=Message._meta.db_table) + "SELECT id FROM path ORDER BY depth DESC", [message_id]
        )
        return [row[0] for row in cursor.fetchall()]
