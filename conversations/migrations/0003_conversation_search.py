"""Full-text search over a user's conversations, in each database's own way,
as agents/migrations/0004_library_search.py does for the library.

SQLite: FTS5 tables kept in sync by triggers, so every write path (services,
the artifact manager, the admin, a raw UPDATE) updates the index. Each indexes
its rows' owner as a column too, so a search reads the postings of the user's
own rows, not of everyone's. Questions and answers, and artifact text, are the
external content of their tables, through views that add the owner. A
conversation's id is a UUID, not the integer row id FTS5 needs, so titles
(short) are stored in an FTS5 table of their own under the integer id of a
small key table. The triggers and views name the conversation, message and
artifact tables, and SQLite refuses to rename a table into place while any of
them names it: a later migration that makes Django rebuild one of those tables
(altering a column, adding a NOT NULL one) runs search_index_drop before its
operation and search_index_create after.

Postgres: a stored tsvector column per table, generated from its text, with
a GIN index. Django's models do not know these columns; conversations.search
names them in its SQL. Stored, not an index on the expression: Postgres prices
to_tsvector as cheaply as an addition, so for a user with many messages it
would recompute it row by row (hundreds of milliseconds) rather than read an
index; a stored vector costs next to nothing to check either way.
"""

from django.db import migrations

TOKENIZE = "tokenize='porter unicode61 remove_diacritics 2'"

# The external content FTS5 'delete' command must be given exactly the values
# that were indexed, owner included. Django deletes a conversation's messages
# and artifacts before it, but a flush deletes table by table: whichever of a
# row and its conversation goes first takes the row out of the index, and the
# other then finds nothing to do.
SQLITE_CREATE = [
    # Questions and answers.
    """
    CREATE VIEW conversations_message_search AS
    SELECT m.id, m.content, m.response, c.owner_id AS owner
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
        SELECT new.id, new.content, new.response, owner_id FROM conversations_conversation WHERE id = new.conversation_id;
    END
    """,
    """
    CREATE TRIGGER conversations_message_fts_delete AFTER DELETE ON conversations_message BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', old.id, old.content, old.response, owner_id FROM conversations_conversation WHERE id = old.conversation_id;
    END
    """,
    # Only new text reindexes: saving a message's metadata or rendered answer does not.
    """
    CREATE TRIGGER conversations_message_fts_update AFTER UPDATE OF content, response, conversation_id ON conversations_message
    WHEN new.content IS NOT old.content OR new.response IS NOT old.response OR new.conversation_id IS NOT old.conversation_id
    BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', old.id, old.content, old.response, owner_id FROM conversations_conversation WHERE id = old.conversation_id;
        INSERT INTO conversations_message_fts(rowid, content, response, owner)
        SELECT new.id, new.content, new.response, owner_id FROM conversations_conversation WHERE id = new.conversation_id;
    END
    """,
    # Artifact text; an artifact's session has its conversation's id.
    """
    CREATE VIEW artifacts_artifact_search AS
    SELECT a.id, a.title, a.content, c.owner_id AS owner
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
        SELECT new.id, new.title, new.content, owner_id FROM conversations_conversation WHERE id = new.session_id;
    END
    """,
    """
    CREATE TRIGGER artifacts_artifact_fts_delete AFTER DELETE ON artifacts_artifact BEGIN
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', old.id, old.title, old.content, owner_id FROM conversations_conversation WHERE id = old.session_id;
    END
    """,
    """
    CREATE TRIGGER artifacts_artifact_fts_update AFTER UPDATE OF title, content, session_id ON artifacts_artifact
    WHEN new.title IS NOT old.title OR new.content IS NOT old.content OR new.session_id IS NOT old.session_id
    BEGIN
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', old.id, old.title, old.content, owner_id FROM conversations_conversation WHERE id = old.session_id;
        INSERT INTO artifacts_artifact_fts(rowid, title, content, owner)
        SELECT new.id, new.title, new.content, owner_id FROM conversations_conversation WHERE id = new.session_id;
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
        INSERT INTO conversations_conversation_fts(rowid, title, owner) VALUES (last_insert_rowid(), new.title, new.owner_id);
    END
    """,
    # Posting a message saves the conversation too; only a new title or owner reindexes.
    """
    CREATE TRIGGER conversations_conversation_fts_update AFTER UPDATE OF title, owner_id ON conversations_conversation
    WHEN new.title IS NOT old.title OR new.owner_id IS NOT old.owner_id BEGIN
        UPDATE conversations_conversation_fts SET title = new.title, owner = new.owner_id
        WHERE rowid = (SELECT id FROM conversations_conversation_fts_key WHERE conversation_id = new.id);
    END
    """,
    """
    CREATE TRIGGER conversations_conversation_fts_owner AFTER UPDATE OF owner_id ON conversations_conversation
    WHEN new.owner_id IS NOT old.owner_id BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', id, content, response, old.owner_id FROM conversations_message WHERE conversation_id = old.id;
        INSERT INTO conversations_message_fts(rowid, content, response, owner)
        SELECT id, content, response, new.owner_id FROM conversations_message WHERE conversation_id = new.id;
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', id, title, content, old.owner_id FROM artifacts_artifact WHERE session_id = old.id;
        INSERT INTO artifacts_artifact_fts(rowid, title, content, owner)
        SELECT id, title, content, new.owner_id FROM artifacts_artifact WHERE session_id = new.id;
    END
    """,
    """
    CREATE TRIGGER conversations_conversation_fts_delete AFTER DELETE ON conversations_conversation BEGIN
        INSERT INTO conversations_message_fts(conversations_message_fts, rowid, content, response, owner)
        SELECT 'delete', id, content, response, old.owner_id FROM conversations_message WHERE conversation_id = old.id;
        INSERT INTO artifacts_artifact_fts(artifacts_artifact_fts, rowid, title, content, owner)
        SELECT 'delete', id, title, content, old.owner_id FROM artifacts_artifact WHERE session_id = old.id;
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
    SELECT k.id, c.title, c.owner_id FROM conversations_conversation_fts_key AS k
    JOIN conversations_conversation AS c ON c.id = k.conversation_id
    """,
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS conversations_message_fts_insert",
    "DROP TRIGGER IF EXISTS conversations_message_fts_delete",
    "DROP TRIGGER IF EXISTS conversations_message_fts_update",
    "DROP TABLE IF EXISTS conversations_message_fts",
    "DROP VIEW IF EXISTS conversations_message_search",
    "DROP TRIGGER IF EXISTS artifacts_artifact_fts_insert",
    "DROP TRIGGER IF EXISTS artifacts_artifact_fts_delete",
    "DROP TRIGGER IF EXISTS artifacts_artifact_fts_update",
    "DROP TABLE IF EXISTS artifacts_artifact_fts",
    "DROP VIEW IF EXISTS artifacts_artifact_search",
    "DROP TRIGGER IF EXISTS conversations_conversation_fts_insert",
    "DROP TRIGGER IF EXISTS conversations_conversation_fts_update",
    "DROP TRIGGER IF EXISTS conversations_conversation_fts_owner",
    "DROP TRIGGER IF EXISTS conversations_conversation_fts_delete",
    "DROP TABLE IF EXISTS conversations_conversation_fts",
    "DROP TABLE IF EXISTS conversations_conversation_fts_key",
]


# A tsvector holds at most 1 MB, which a text of unique tokens (a log, a list
# of hashes) passes at about 1M characters, and a row whose vector fails
# cannot be saved: long texts are indexed up to
# conversations.search.POSTGRES_INDEXED_CHARS characters.
POSTGRES_CREATE = [
    """
    ALTER TABLE conversations_conversation ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('english', title)) STORED
    """,
    "CREATE INDEX conversation_search_vector ON conversations_conversation USING gin (search_vector)",
    """
    ALTER TABLE conversations_message ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('english', content) || to_tsvector('english', left(response, 100000))) STORED
    """,
    "CREATE INDEX message_search_vector ON conversations_message USING gin (search_vector)",
    """
    ALTER TABLE artifacts_artifact ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('english', title) || to_tsvector('english', left(content, 100000))) STORED
    """,
    "CREATE INDEX artifact_search_vector ON artifacts_artifact USING gin (search_vector)",
]
POSTGRES_DROP = [
    "ALTER TABLE conversations_conversation DROP COLUMN IF EXISTS search_vector",
    "ALTER TABLE conversations_message DROP COLUMN IF EXISTS search_vector",
    "ALTER TABLE artifacts_artifact DROP COLUMN IF EXISTS search_vector",
]


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


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0002_message_response_html"),
        ("artifacts", "0001_initial"),
    ]

    operations = [migrations.RunPython(search_index_create, search_index_drop)]
