"""The team library: documents staff upload, read once into text, for every
user's agents to search (web_search's local provider) and read (web_fetch of a
library://<id> URL).

Search is full-text in the database itself, so the embedded default needs no
search server: FTS5 with bm25 on SQLite, tsvector with ts_rank on Postgres.
Both take the user's words, never their syntax, so no query can fail, and
both apply the same relevance cut-off (library_search), so a question the
library does not cover finds nothing rather than weak hits.
"""

import re
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.core.files.uploadedfile import UploadedFile
from django.db import connection

from artifacts.services import artifact_upload_check
from artifacts.uploads import ConvertedUpload, UploadError, convert_upload

from .models import LIBRARY_URL_PREFIX, LibraryDocument
from .tools.base import ToolResult, tool_error

# A question a model or person types has a handful of words; a pasted page
# would only make the query slow.
QUERY_MAX_TERMS = 32
SNIPPET_WORDS = 24

# Letters and digits: "_" separates words, as in both databases' parsers.
_WORD = re.compile(r"[^\W_]+")
# Words that name no topic, dropped from every query: Postgres's English
# stop-word list (its english configuration ignores them anyway, but FTS5
# keeps every word, so on SQLite "how" or "the" would match nearly every
# document), then the words requests are phrased with.
STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is
    are was were be been being have has had having do does did doing a an the and but if or because as until
    while of at by for with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will just don should now
    could would may might must shall also please tell explain describe give know want need
    """.split()
)
_URL = re.compile(re.escape(LIBRARY_URL_PREFIX) + r"(\d+)/?")

# Title matches count more than body matches. Migration 0004 indexes exactly
# this expression; change both together.
_POSTGRES_VECTOR = SearchVector("title", weight="A", config="english") + SearchVector(
    "content", weight="B", config="english"
)


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


def library_file_read(*, uploaded_file: UploadedFile) -> ConvertedUpload:
    """The text of an upload, or UploadError saying why there is none.

    The admin calls this while validating its form, so a file we cannot read
    is reported on the form rather than after it was saved.
    """
    artifact_upload_check(size=uploaded_file.size)
    uploaded_file.seek(0)
    converted = convert_upload(
        filename=uploaded_file.name,
        data=uploaded_file.read(),
        content_type=uploaded_file.content_type or "",
    )
    if converted.kind != "text":
        raise UploadError(f"{converted.title} has no text we can read; upload markdown, text, Word or PDF.")
    if not converted.content.strip():
        raise UploadError(f"{converted.title} contains no text.")
    return converted


def library_document_create(
    *, user, title: str = "", uploaded_file: UploadedFile | None = None, content: str | None = None
) -> LibraryDocument:
    """Add a document to the library from an uploaded file (its text read
    here, its name the default title) or from markdown text."""
    if (uploaded_file is None) == (content is None):
        raise ValueError("library_document_create takes uploaded_file or content, not both")
    document = LibraryDocument(title=title or "Untitled", content=content or "", uploaded_by=user)
    if uploaded_file is not None:
        converted = library_file_read(uploaded_file=uploaded_file)
        document.content, document.content_type = converted.content, converted.content_type
        document.title = title or converted.title
        uploaded_file.seek(0)
        document.original_file.save(uploaded_file.name, uploaded_file, save=False)
    document.save()
    return document


def library_search(*, query: str, limit: int) -> list[SearchHit]:
    """The documents relevant to the query, best first.

    Relevance is counted, not read off the rank: bm25 and ts_rank have
    different scales, and both give some rank to any document that shares
    one common word with the question. Each meaningful word of the query
    (stop words dropped) earns a document a point if the document contains
    it, in any form the database's stemmer joins, and a second point if its
    title does. A document is relevant when its points exceed half the
    number of words: a majority of the words in its text, or about one word
    in four in its title. So "benefits of heat pumps compared to gas
    boilers" (6 words) finds the document titled Heat pumps (4 points), but
    "write a cover letter for a job application" (5 words) misses the SQLite
    document that mentions writes and web applications (2 points).
    """
    words = (word.lower() for word in _WORD.findall(query))
    terms = list(dict.fromkeys(word for word in words if word not in STOP_WORDS))[:QUERY_MAX_TERMS]
    if not terms or limit < 1:
        return []
    if connection.vendor == "postgresql":
        return _postgres_search(terms=terms, limit=limit)
    return _sqlite_search(terms=terms, limit=limit)


def _sqlite_search(*, terms: list[str], limit: int) -> list[SearchHit]:
    # Each word a quoted string (_WORD lets no quote into one): FTS5 takes
    # it as a word whatever it spells, never as an operator.
    phrases = [f'"{term}"' for term in terms]
    # A row per word a document contains and another per word its title
    # contains: a document's points are its rows.
    points = " UNION ALL ".join(
        ["SELECT rowid AS id FROM agents_librarydocument_fts WHERE agents_librarydocument_fts MATCH %s"]
        * (2 * len(terms))
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH points AS ({points}),
            relevant AS (SELECT id FROM points GROUP BY id HAVING 2 * COUNT(*) > %s)
            SELECT d.id, d.title,
                   snippet(agents_librarydocument_fts, 1, '**', '**', '…', %s)
            FROM agents_librarydocument_fts
            JOIN agents_librarydocument AS d ON d.id = agents_librarydocument_fts.rowid
            WHERE agents_librarydocument_fts MATCH %s AND d.id IN relevant
            -- bm25 is lower for better matches; a title match weighs 3 body matches.
            ORDER BY bm25(agents_librarydocument_fts, 3.0, 1.0), d.id
            LIMIT %s
            """,
            [
                *phrases,
                *(f"title : {phrase}" for phrase in phrases),
                len(terms),
                SNIPPET_WORDS,
                " OR ".join(phrases),
                limit,
            ],
        )
        return [
            SearchHit(title=title, url=f"{LIBRARY_URL_PREFIX}{pk}", snippet=snippet)
            for pk, title, snippet in cursor.fetchall()
        ]


def _postgres_search(*, terms: list[str], limit: int) -> list[SearchHit]:
    # websearch syntax never raises; joined with "or" so a question's words
    # rank documents as on SQLite instead of all being required.
    query = " or ".join(terms)
    candidates = (
        LibraryDocument.objects.alias(vector=_POSTGRES_VECTOR)
        .filter(vector=SearchQuery(query, search_type="websearch", config="english"))
        .annotate(document_vector=_POSTGRES_VECTOR)
        .values("id", "title", "content", "document_vector")
        .order_by()
    )
    candidates_sql, candidates_params = candidates.query.sql_with_params()
    # Points are counted on the vector each candidate's row holds: parsing a
    # document once per word would make a long question slow. A word is in
    # the title when it is a lexeme of the title's weight, A.
    points = " + ".join(
        [
            (
                "(document_vector @@ plainto_tsquery('english', %s))::int"
                " + (ts_filter(document_vector, '{a}') @@ plainto_tsquery('english', %s))::int"
            )
        ]
        * len(terms)
    )
    headline = (
        f"StartSel='**', StopSel='**', MaxWords={SNIPPET_WORDS}, MinWords={SNIPPET_WORDS // 2}, FragmentDelimiter=' … '"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH candidates AS MATERIALIZED ({candidates_sql})
            SELECT id, title, ts_headline('english', content, websearch_to_tsquery('english', %s), %s)
            FROM candidates
            WHERE 2 * ({points}) > %s
            ORDER BY ts_rank(document_vector, websearch_to_tsquery('english', %s)) DESC, id
            LIMIT %s
            """,
            [
                *candidates_params,
                query,
                headline,
                *(term for term in terms for _ in range(2)),
                len(terms),
                query,
                limit,
            ],
        )
        return [
            SearchHit(title=title, url=f"{LIBRARY_URL_PREFIX}{pk}", snippet=snippet)
            for pk, title, snippet in cursor.fetchall()
        ]


def library_document_fetch(*, url: str) -> ToolResult:
    """A library document for web_fetch, which hands library:// URLs here."""
    match = _URL.fullmatch(url.strip())
    if match is None:
        return tool_error(
            tool="web_fetch", message=f"{url} is not a library URL; they look like {LIBRARY_URL_PREFIX}12."
        )
    document = LibraryDocument.objects.filter(pk=int(match[1])).first()
    if document is None:
        return tool_error(
            tool="web_fetch", message=f"There is no library document {url}; search the library for its current URL."
        )
    return ToolResult(
        success=True,
        content=(
            f"<page url={quoteattr(document.url)} title={quoteattr(document.title)} "
            f"content_type={quoteattr(document.content_type)}><content>{escape(document.content)}</content></page>"
        ),
        metadata={"url": document.url, "title": document.title},
    )
