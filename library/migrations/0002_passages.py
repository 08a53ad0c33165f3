"""Library documents cut into passages (library.passages), each indexed for
full-text search as the documents are (agents' migration 0009): each CJK
character a word of its own through cjk_split. SQLite: an FTS5 table over a
view of the passages, kept in sync by triggers, with a column naming each
passage's document (d12), so a search can keep to the passages of the
documents it found relevant within the index. Postgres: a stored weighted
tsvector (the document's title A, the headings B, the text C) with a GIN
index. Documents saved before this migration are cut and indexed here."""

import django.db.models.deletion
from django.db import migrations, models

SQLITE_CREATE = [
    """
    CREATE VIEW library_librarypassage_search AS
    SELECT id, cjk_split(title) AS title, cjk_split(heading) AS heading, cjk_split(text) AS text,
           'd' || document_id AS document
    FROM library_librarypassage
    """,
    """
    CREATE VIRTUAL TABLE library_librarypassage_fts USING fts5(
        title, heading, text, document,
        content='library_librarypassage_search', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER library_librarypassage_fts_insert AFTER INSERT ON library_librarypassage BEGIN
        INSERT INTO library_librarypassage_fts(rowid, title, heading, text, document)
        VALUES (new.id, cjk_split(new.title), cjk_split(new.heading), cjk_split(new.text), 'd' || new.document_id);
    END
    """,
    """
    CREATE TRIGGER library_librarypassage_fts_delete AFTER DELETE ON library_librarypassage BEGIN
        INSERT INTO library_librarypassage_fts(library_librarypassage_fts, rowid, title, heading, text, document)
        VALUES ('delete', old.id, cjk_split(old.title), cjk_split(old.heading), cjk_split(old.text), 'd' || old.document_id);
    END
    """,
    """
    CREATE TRIGGER library_librarypassage_fts_update AFTER UPDATE ON library_librarypassage BEGIN
        INSERT INTO library_librarypassage_fts(library_librarypassage_fts, rowid, title, heading, text, document)
        VALUES ('delete', old.id, cjk_split(old.title), cjk_split(old.heading), cjk_split(old.text), 'd' || old.document_id);
        INSERT INTO library_librarypassage_fts(rowid, title, heading, text, document)
        VALUES (new.id, cjk_split(new.title), cjk_split(new.heading), cjk_split(new.text), 'd' || new.document_id);
    END
    """,
]
SQLITE_DROP = [
    "DROP TABLE IF EXISTS library_librarypassage_fts",
    "DROP VIEW IF EXISTS library_librarypassage_search",
]
POSTGRES_CREATE = [
    """
    ALTER TABLE library_librarypassage ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', cjk_split(title)), 'A')
        || setweight(to_tsvector('english', cjk_split(heading)), 'B')
        || setweight(to_tsvector('english', cjk_split(text)), 'C')
    ) STORED
    """,
    "CREATE INDEX library_passage_search_vector ON library_librarypassage USING gin (search_vector)",
]
POSTGRES_DROP = ["ALTER TABLE library_librarypassage DROP COLUMN IF EXISTS search_vector"]


def search_index_create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in {"sqlite": SQLITE_CREATE, "postgresql": POSTGRES_CREATE}.get(vendor, []):
        schema_editor.execute(statement)


def search_index_drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in {"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}.get(vendor, []):
        schema_editor.execute(statement)


def passages_index(apps, schema_editor):
    # The cut as this release makes it; a later one re-cuts with library_reindex.
    from library.services import passages_of

    LibraryDocument = apps.get_model("library", "LibraryDocument")
    LibraryPassage = apps.get_model("library", "LibraryPassage")
    for document in LibraryDocument.objects.using(schema_editor.connection.alias).iterator(chunk_size=100):
        LibraryPassage.objects.using(schema_editor.connection.alias).bulk_create(
            LibraryPassage(document_id=document.pk, **fields) for fields in passages_of(document)
        )


class Migration(migrations.Migration):

    dependencies = [
        ('library', '0001_initial'),
        ('agents', '0009_library_search_cjk'),
    ]

    operations = [
        migrations.CreateModel(
            name='LibraryPassage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('start', models.PositiveIntegerField()),
                ('end', models.PositiveIntegerField()),
                ('heading', models.CharField(blank=True, max_length=1000)),
                ('page', models.PositiveIntegerField(blank=True, null=True)),
                ('title', models.CharField(max_length=300)),
                ('text', models.TextField()),
                ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='passages', to='library.librarydocument')),
            ],
            options={
                'ordering': ['document', 'number'],
                'constraints': [models.UniqueConstraint(fields=('document', 'number'), name='library_passage_number')],
            },
        ),
        migrations.RunPython(search_index_create, search_index_drop),
        migrations.RunPython(passages_index, migrations.RunPython.noop),
    ]
