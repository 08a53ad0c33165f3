"""Full-text search over the library, in each database's own way.

SQLite: an FTS5 table with the documents table as its external content, kept
in sync by triggers, so every write path (the admin, services, a raw UPDATE)
updates the index. Postgres: a GIN index on the weighted tsvector expression
agents.library searches with; the two must stay identical for it to be used.
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import migrations

SQLITE_CREATE = [
    """
    CREATE VIRTUAL TABLE agents_librarydocument_fts USING fts5(
        title, content,
        content='agents_librarydocument', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER agents_librarydocument_fts_insert AFTER INSERT ON agents_librarydocument BEGIN
        INSERT INTO agents_librarydocument_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
    END
    """,
    """
    CREATE TRIGGER agents_librarydocument_fts_delete AFTER DELETE ON agents_librarydocument BEGIN
        INSERT INTO agents_librarydocument_fts(agents_librarydocument_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
    END
    """,
    """
    CREATE TRIGGER agents_librarydocument_fts_update AFTER UPDATE ON agents_librarydocument BEGIN
        INSERT INTO agents_librarydocument_fts(agents_librarydocument_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
        INSERT INTO agents_librarydocument_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
    END
    """,
    # Documents saved before this migration.
    "INSERT INTO agents_librarydocument_fts(agents_librarydocument_fts) VALUES ('rebuild')",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS agents_librarydocument_fts_insert",
    "DROP TRIGGER IF EXISTS agents_librarydocument_fts_delete",
    "DROP TRIGGER IF EXISTS agents_librarydocument_fts_update",
    "DROP TABLE IF EXISTS agents_librarydocument_fts",
]


def _postgres_index() -> GinIndex:
    # The same expression as agents.library._POSTGRES_VECTOR.
    vector = SearchVector("title", weight="A", config="english") + SearchVector(
        "content", weight="B", config="english"
    )
    return GinIndex(vector, name="agents_library_search")


def search_index_create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)
    elif schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(apps.get_model("agents", "LibraryDocument"), _postgres_index())


def search_index_drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)
    elif schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("agents", "LibraryDocument"), _postgres_index())


class Migration(migrations.Migration):
    dependencies = [("agents", "0003_library_document")]

    operations = [migrations.RunPython(search_index_create, search_index_drop)]
