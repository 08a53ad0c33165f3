"""Library search that finds Chinese words: every CJK character indexed as a
word of its own (artifactflow.textsearch explains why), as conversations 0004
does for conversations.

SQLite: the FTS5 table now reads its documents through a view that passes
their text through cjk_split. Postgres: the weighted vector is a stored
column generated through the cjk_split function conversations 0004 creates,
with a GIN index, instead of an index on an expression agents.library had to
repeat exactly.
"""

import importlib

from django.db import migrations

previous = importlib.import_module("agents.migrations.0004_library_search")

SQLITE_CREATE = [
    """
    CREATE VIEW agents_librarydocument_search AS
    SELECT id, cjk_split(title) AS title, cjk_split(content) AS content FROM agents_librarydocument
    """,
    """
    CREATE VIRTUAL TABLE agents_librarydocument_fts USING fts5(
        title, content,
        content='agents_librarydocument_search', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER agents_librarydocument_fts_insert AFTER INSERT ON agents_librarydocument BEGIN
        INSERT INTO agents_librarydocument_fts(rowid, title, content)
        VALUES (new.id, cjk_split(new.title), cjk_split(new.content));
    END
    """,
    """
    CREATE TRIGGER agents_librarydocument_fts_delete AFTER DELETE ON agents_librarydocument BEGIN
        INSERT INTO agents_librarydocument_fts(agents_librarydocument_fts, rowid, title, content)
        VALUES ('delete', old.id, cjk_split(old.title), cjk_split(old.content));
    END
    """,
    """
    CREATE TRIGGER agents_librarydocument_fts_update AFTER UPDATE ON agents_librarydocument BEGIN
        INSERT INTO agents_librarydocument_fts(agents_librarydocument_fts, rowid, title, content)
        VALUES ('delete', old.id, cjk_split(old.title), cjk_split(old.content));
        INSERT INTO agents_librarydocument_fts(rowid, title, content)
        VALUES (new.id, cjk_split(new.title), cjk_split(new.content));
    END
    """,
    # Documents saved before this migration.
    "INSERT INTO agents_librarydocument_fts(agents_librarydocument_fts) VALUES ('rebuild')",
]
SQLITE_DROP = [*previous.SQLITE_DROP, "DROP VIEW IF EXISTS agents_librarydocument_search"]

# Title matches count more than body matches: agents.library reads the
# weights back (weight A is the title).
POSTGRES_CREATE = [
    """
    ALTER TABLE agents_librarydocument ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', cjk_split(title)), 'A')
        || setweight(to_tsvector('english', cjk_split(content)), 'B')
    ) STORED
    """,
    "CREATE INDEX agents_library_search_vector ON agents_librarydocument USING gin (search_vector)",
]
POSTGRES_DROP = ["ALTER TABLE agents_librarydocument DROP COLUMN IF EXISTS search_vector"]


def search_index_create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)
    elif schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRES_CREATE:
            schema_editor.execute(statement)


def search_index_drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)
    elif schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRES_DROP:
            schema_editor.execute(statement)


def search_index_rebuild(apps, schema_editor):
    previous.search_index_drop(apps, schema_editor)
    search_index_create(apps, schema_editor)


def search_index_restore(apps, schema_editor):
    search_index_drop(apps, schema_editor)
    previous.search_index_create(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0008_run_retry_of"),
        ("conversations", "0004_search_cjk"),
    ]

    operations = [migrations.RunPython(search_index_rebuild, search_index_restore)]
