"""The library's passages found by their meaning as well as by their words,
where an embeddings model is configured (settings.EMBEDDINGS): each passage
gets a vector (library.embeddings), kept in a SQLite file of its own with
sqlite-vec (settings.LIBRARY_VECTORS_PATH), and a search's full-text hits are
fused with the passages nearest the question (library.selectors.library_search,
reciprocal rank fusion). Python's own sqlite3 here loads no extensions, so the
file is opened with apsw. Vectors are derived data: a passage is cut once and
never changed (a document's new text is new passages), so indexing embeds the
passages that have none and forgets those gone, a batch at a time, and goes on
where it stopped. Postgres keeps to full-text search (pgvector is not used yet)."""

import logging
import struct
import time
from dataclasses import dataclass

import apsw
import sqlite_vec
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django_q.tasks import async_task

from .embeddings import BATCH_MAX, EmbeddingsError, embeddings_configured, embeddings_create
from .models import LibraryDocument, LibraryPassage

logger = logging.getLogger(__name__)

# How many passages nearest the question a search fuses with its full-text hits.
VECTOR_CANDIDATES = 50
# A passage's text as embedded: its document's title and headings, then its text, cut here.
INPUT_MAX_CHARS = 6000
# One task's indexing stops starting batches after this long, and queues the next task.
INDEX_SECONDS = 60
TASK = "library.vectors.vectors_index_task"
# Set while an indexing task is queued: the saves of a bulk upload queue one, not hundreds.
_QUEUED_KEY = "library-vectors-queued"


def vectors_enabled() -> bool:
    return embeddings_configured() and connection.vendor == "sqlite"


class _Store:
    """The vectors file: passages(id, embedding) and the model that made them.

    A plain table, its vectors compared by sqlite-vec's vec_distance_cosine:
    a search compares the question with the passages of the documents its
    words chose (a few hundred rows by their key), and with every passage
    only when the words chose none. vec0's k-nearest search reads every
    vector too (it has no index that skips any), so it would cost as much at
    every search for passages the fusion then sets aside."""

    # Raise when the file's tables change: a file of another layout is made again.
    LAYOUT = "1"

    def __init__(self):
        path = settings.LIBRARY_VECTORS_PATH
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = apsw.Connection(str(path))
        self.db.set_busy_timeout(10_000)
        self.db.enable_load_extension(True)
        self.db.load_extension(sqlite_vec.loadable_path())
        self.db.enable_load_extension(False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def close(self) -> None:
        self.db.close()

    def made_by(self) -> tuple[str, int] | None:
        rows = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        if rows.get("layout") != self.LAYOUT or "model" not in rows:
            return None
        return rows["model"], int(rows["dimensions"])

    def remake(self, *, model: str, dimensions: int) -> None:
        with self.db:
            self.db.execute("DROP TABLE IF EXISTS passages")
            self.db.execute("CREATE TABLE passages (id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
            self.db.execute("DELETE FROM meta")
            self.db.execute(
                "INSERT INTO meta VALUES ('layout', ?), ('model', ?), ('dimensions', ?)",
                (self.LAYOUT, model, str(dimensions)),
            )

    def ids(self) -> set[int]:
        if self.made_by() is None:
            return set()
        return {pk for (pk,) in self.db.execute("SELECT id FROM passages")}

    def add(self, rows: list[tuple[int, list[float]]]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO passages (id, embedding) VALUES (?, ?)",
                [(pk, _packed(vector)) for pk, vector in rows],
            )

    def remove(self, ids: set[int]) -> None:
        with self.db:
            self.db.executemany("DELETE FROM passages WHERE id = ?", [(pk,) for pk in ids])

    def nearest(self, vector: list[float], *, k: int, within: list[int]) -> dict[int, float]:
        """The cosine distances of the passages `within`; with none, of the k nearest of all."""
        made = self.made_by()
        if made is None or made[1] != len(vector):
            return {}
        packed = _packed(vector)
        if not within:
            return dict(
                self.db.execute(
                    "SELECT id, vec_distance_cosine(embedding, ?) AS distance FROM passages ORDER BY distance LIMIT ?",
                    (packed, k),
                ).fetchall()
            )
        found = {}
        for start in range(0, len(within), 500):
            chunk = within[start : start + 500]
            found.update(
                self.db.execute(
                    f"SELECT id, vec_distance_cosine(embedding, ?) FROM passages WHERE id IN ({', '.join('?' * len(chunk))})",
                    (packed, *chunk),
                ).fetchall()
            )
        return found


def _packed(vector: list[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


def _input(*, title: str, heading: str, text: str) -> str:
    return "\n".join(part for part in (title, heading, text) if part)[:INPUT_MAX_CHARS]


@dataclass(frozen=True)
class VectorsIndexed:
    embedded: int
    removed: int
    # Passages still without a vector: the next run embeds them.
    left: int
    # Why the run stopped before its time, when the service failed.
    error: str = ""


def vectors_index(*, seconds: float = INDEX_SECONDS) -> VectorsIndexed:
    """Embeds the passages of indexed documents that have no vector yet and
    forgets the vectors of passages gone, a batch (one request, one commit)
    at a time, for about `seconds`, or until the service fails (said in
    `error`): what was stored stays, and the next run goes on from there."""
    if not vectors_enabled():
        return VectorsIndexed(0, 0, 0)
    deadline = time.monotonic() + seconds
    store = _Store()
    try:
        model = settings.EMBEDDINGS["model"]
        made = store.made_by()
        current = set(
            LibraryPassage.objects.filter(document__status=LibraryDocument.Status.INDEXED).values_list("pk", flat=True)
        )
        known = store.ids() if made is not None and made[0] == model else set()
        gone = known - current
        if gone:
            store.remove(gone)
        todo = sorted(current - known)
        embedded = 0
        for start in range(0, len(todo), BATCH_MAX):
            if time.monotonic() > deadline:
                break
            batch = LibraryPassage.objects.filter(pk__in=todo[start : start + BATCH_MAX]).values_list(
                "pk", "title", "heading", "text"
            )
            rows = list(batch)
            try:
                vectors = embeddings_create([_input(title=t, heading=h, text=x) for _pk, t, h, x in rows])
            except EmbeddingsError as error:
                return VectorsIndexed(embedded=embedded, removed=len(gone), left=len(todo) - embedded, error=str(error))
            if made is None or made != (model, len(vectors[0])):
                # Another model's vectors (or none yet): measured apart, they cannot be mixed.
                store.remake(model=model, dimensions=len(vectors[0]))
                made = (model, len(vectors[0]))
            store.add([(pk, vector) for (pk, *_rest), vector in zip(rows, vectors, strict=True)])
            embedded += len(rows)
        return VectorsIndexed(embedded=embedded, removed=len(gone), left=len(todo) - embedded)
    finally:
        store.close()


def vectors_index_queue() -> None:
    """Queues an indexing task once the transaction commits, unless one is queued already."""
    if vectors_enabled() and cache.add(_QUEUED_KEY, True, timeout=INDEX_SECONDS * 10):
        transaction.on_commit(lambda: async_task(TASK, task_name="library-vectors"))


def vectors_index_task() -> None:
    """The worker's entry point (TASK): a run of indexing, and another queued if passages are left."""
    cache.delete(_QUEUED_KEY)
    indexed = vectors_index(seconds=INDEX_SECONDS)
    if indexed.error:
        # The next document saved, or library_reindex, tries again.
        logger.warning("%s library passages were left without vectors: %s", indexed.left, indexed.error)
    elif indexed.left:
        vectors_index_queue()


def vectors_query(*, query: str) -> list[float] | None:
    """The query's vector; None when vectors are off or the service fails
    (the search then goes on with its words alone)."""
    if not vectors_enabled() or not query.strip():
        return None
    try:
        [vector] = embeddings_create([query[:INPUT_MAX_CHARS]])
    except EmbeddingsError as error:
        logger.warning("The library searched by words alone: %s", error)
        return None
    return vector


def vectors_nearest(*, vector: list[float], within: list[int] = (), k: int = VECTOR_CANDIDATES) -> dict[int, float]:
    """Passage ids and their cosine distances from the vector: those
    `within` (the passages of the documents a search's words found), or
    when there are none the k nearest of the whole library."""
    store = _Store()
    try:
        return store.nearest(vector, k=k, within=list(within))
    finally:
        store.close()
