"""Search that finds Chinese words: every CJK character indexed as a word of
its own (artifactflow.textsearch explains why), in both databases.

The indexes are those of migration 0003, rebuilt from the rows: on SQLite the
same FTS5 tables, views and triggers, with every text passed through
cjk_split (a function each connection is given by
artifactflow.sqlite3, the SQLite backend settings name); on Postgres the same
stored tsvector columns, generated through cjk_split, an SQL function this
migration creates. A later migration that makes Django rebuild one of the
indexed tables on SQLite runs this migration's search_index_drop before its
operation and search_index_create after, as 0003 explains.
"""

import importlib

from django.db import migrations

previous = importlib.import_module("conversations.migrations.0003_conversation_search")

TOKENIZE = previous.TOKENIZE

SQLITE_CREATE = [
    # Questions and answers.
    """
    CREATE VIEW conversations_message_search AS
    SELECT m.id, cjk_split(m.content) AS content, cjk_split(m.response) AS response, c.owner_id AS owner
    FROM conversations_message AS m JOIN conversations_conversation AS c ON c.id = m.conversation_id
    """,
    f"""
    CREATE VIRTUAL TABLE conversations_message_fts USING fts5(
        content, response, owner, content='conversations_message_search', content_rowid='id', {TOKENIZE}
    )
    """,
    """
    CREATE TRIGGER conversations_message_fts_insert AFTER INSERT ON conversations_message BEGIN
        INSERT INTO conversations_message_fts(rowid, content, response, owner)
        SELECT new.id, cjk_split(new.content), cjk_split(new.response), owner_id FROM conversations_conversation WHERE id = new.conversation_id;
    END
    """,
    """
    CREATE TRIGGER conversations_message_fts_delete AFTER DELETE ON conversations_message BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', old.id, cjk_split(old.content), cjk_split(old.response), owner_id FROM conversations_conversation WHERE id = old.conversation_id;
    END
    """,
    # Only new text reindexes: saving a message's metadata or rendered answer does not.
    """
    CREATE TRIGGER conversations_message_fts_update AFTER UPDATE OF content, response, conversation_id ON conversations_message
    WHEN new.content IS NOT old.content OR new.response IS NOT old.response OR new.conversation_id IS NOT old.conversation_id
    BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', old.id, cjk_split(old.content), cjk_split(old.response), owner_id FROM conversations_conversation WHERE id = old.conversation_id;
        INSERT INTO conversations_message_fts(rowid, content, response, owner)
        SELECT new.id, cjk_split(new.content), cjk_split(new.response), owner_id FROM conversations_conversation WHERE id = new.conversation_id;
    END
    """,
    # Artifact text; an artifact's session has its conversation's id.
    """
    CREATE VIEW artifacts_artifact_search AS
    SELECT a.id, cjk_split(a.title) AS title, cjk_split(a.content) AS content, c.owner_id AS owner
    FROM artifacts_artifact AS a JOIN conversations_conversation AS c ON c.id = a.session_id
    """,
    f"""
    CREATE VIRTUAL TABLE artifacts_artifact_fts USING fts5(
        title, content, owner, content='artifacts_artifact_search', content_rowid='id', {TOKENIZE}
    )
    """,
    """
    CREATE TRIGGER artifacts_artifact_fts_insert AFTER INSERT ON artifacts_artifact BEGIN
        INSERT INTO artifacts_artifact_fts(rowid, title, content, owner)
        SELECT new.id, cjk_split(new.title), cjk_split(new.content), owner_id FROM conversations_conversation WHERE id = new.session_id;
    END
    """,
    """
    CREATE TRIGGER artifacts_artifact_fts_delete AFTER DELETE ON artifacts_artifact BEGIN
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', old.id, cjk_split(old.title), cjk_split(old.content), owner_id FROM conversations_conversation WHERE id = old.session_id;
    END
    """,
    """
    CREATE TRIGGER artifacts_artifact_fts_update AFTER UPDATE OF title, content, session_id ON artifacts_artifact
    WHEN new.title IS NOT old.title OR new.content IS NOT old.content OR new.session_id IS NOT old.session_id
    BEGIN
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', old.id, cjk_split(old.title), cjk_split(old.content), owner_id FROM conversations_conversation WHERE id = old.session_id;
        INSERT INTO artifacts_artifact_fts(rowid, title, content, owner)
        SELECT new.id, cjk_split(new.title), cjk_split(new.content), owner_id FROM conversations_conversation WHERE id = new.session_id;
    END
    """,
    # Titles. The implicit rowid of the conversations table would do, but
    # VACUUM may renumber it in a table without an INTEGER PRIMARY KEY.
    """
    CREATE TABLE conversations_conversation_fts_key (
        id INTEGER PRIMARY KEY, conversation_id char(32) NOT NULL UNIQUE
    )
    """,
    f"CREATE VIRTUAL TABLE conversations_conversation_fts USING fts5(title, owner, {TOKENIZE})",
    """
    CREATE TRIGGER conversations_conversation_fts_insert AFTER INSERT ON conversations_conversation BEGIN
        INSERT INTO conversations_conversation_fts_key(conversation_id) VALUES (new.id);
        INSERT INTO conversations_conversation_fts(rowid, title, owner) VALUES (last_insert_rowid(), cjk_split(new.title), new.owner_id);
    END
    """,
    # Posting a message saves the conversation too; only a new title or owner reindexes.
    """
    CREATE TRIGGER conversations_conversation_fts_update AFTER UPDATE OF title, owner_id ON conversations_conversation
    WHEN new.title IS NOT old.title OR new.owner_id IS NOT old.owner_id BEGIN
        UPDATE conversations_conversation_fts SET title = cjk_split(new.title), owner = new.owner_id
        WHERE rowid = (SELECT id FROM conversations_conversation_fts_key WHERE conversation_id = new.id);
    END
    """,
    """
    CREATE TRIGGER conversations_conversation_fts_owner AFTER UPDATE OF owner_id ON conversations_conversation
    WHEN new.owner_id IS NOT old.owner_id BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', id, cjk_split(content), cjk_split(response), old.owner_id FROM conversations_message WHERE conversation_id = old.id;
        INSERT INTO conversations_message_fts(rowid, content, response, owner)
        SELECT id, cjk_split(content), cjk_split(response), new.owner_id FROM conversations_message WHERE conversation_id = new.id;
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', id, cjk_split(title), cjk_split(content), old.owner_id FROM artifacts_artifact WHERE session_id = old.id;
        INSERT INTO artifacts_artifact_fts(rowid, title, content, owner)
        SELECT id, cjk_split(title), cjk_split(content), new.owner_id FROM artifacts_artifact WHERE session_id = new.id;
    END
    """,
    """
    CREATE TRIGGER conversations_conversation_fts_delete AFTER DELETE ON conversations_conversation BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', id, cjk_split(content), cjk_split(response), old.owner_id FROM conversations_message WHERE conversation_id = old.id;
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', id, cjk_split(title), cjk_split(content), old.owner_id FROM artifacts_artifact WHERE session_id = old.id;
        DELETE FROM conversations_conversation_fts
        WHERE rowid = (SELECT id FROM conversations_conversation_fts_key WHERE conversation_id = old.id);
        DELETE FROM conversations_conversation_fts_key WHERE conversation_id = old.id;
    END
    """,
    # Rows saved before this migration.
    "INSERT INTO conversations_message_fts(conversations_message_fts) VALUES ('rebuild')",
    "INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts) VALUES ('rebuild')",
    "INSERT INTO conversations_conversation_fts_key(conversation_id) SELECT id FROM conversations_conversation",
    """
    INSERT INTO conversations_conversation_fts(rowid, title, owner)
    SELECT k.id, cjk_split(c.title), c.owner_id FROM conversations_conversation_fts_key AS k
    JOIN conversations_conversation AS c ON c.id = k.conversation_id
    """,
]
SQLITE_DROP = previous.SQLITE_DROP

# artifactflow.textsearch.CJK_RANGES, in the escapes Postgres reads.
POSTGRES_CJK_PATTERN = r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f])"

# Immutable, so generated columns and indexes may call it.
POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION cjk_split(text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT
AS $$ SELECT regexp_replace($1, '{POSTGRES_CJK_PATTERN}', ' \\1 ', 'g') $$
"""
POSTGRES_CREATE = [
    POSTGRES_FUNCTION,
    """
    ALTER TABLE conversations_conversation ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('english', cjk_split(title))) STORED
    """,
    "CREATE INDEX conversation_search_vector ON conversations_conversation USING gin (search_vector)",
    """
    ALTER TABLE conversations_message ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (
        to_tsvector('english', cjk_split(content)) || to_tsvector('english', cjk_split(left(response, 100000)))
    ) STORED
    """,
    "CREATE INDEX message_search_vector ON conversations_message USING gin (search_vector)",
    """
    ALTER TABLE artifacts_artifact ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (
        to_tsvector('english', cjk_split(title)) || to_tsvector('english', cjk_split(left(content, 100000)))
    ) STORED
    """,
    "CREATE INDEX artifact_search_vector ON artifacts_artifact USING gin (search_vector)",
]
# The function stays: the library's index (agents 0009) uses it too.
POSTGRES_DROP = previous.POSTGRES_DROP


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
        ("conversations", "0003_conversation_search"),
        ("artifacts", "0005_uploads_on_every_branch"),
    ]

    operations = [migrations.RunPython(search_index_rebuild, search_index_restore)]
