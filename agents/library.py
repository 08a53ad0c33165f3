"""The team library: documents staff upload, read once into text, for every
user's agents to search (web_search's local provider) and read (web_fetch of a
library://<id> URL).

Search is full-text in the database itself, so the embedded default needs no
search server: FTS5 with bm25 on SQLite, tsvector with ts_rank on Postgres.
Both take the user's words, never their syntax, so no query can fail.
"""

import re
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank, SearchVector
from django.core.files.uploadedfile import UploadedFile
from django.db import connection

from artifacts.services import artifact_upload_check
from artifacts.uploads import ConvertedUpload, UploadError, convert_upload

from .models import LIBRARY_URL_PREFIX, LibraryDocument
from .tooling import ToolResult, tool_error

# A question a model or person types has a handful of words; a pasted page
# would only make the query slow.
QUERY_MAX_TERMS = 32
SNIPPET_WORDS = 24

_WORD = re.compile(r"\w+")
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
    """The documents best matching any of the query's words, best first."""
    terms = _WORD.findall(query)[:QUERY_MAX_TERMS]
    if not terms or limit < 1:
        return []
    if connection.vendor == "postgresql":
        return _postgres_search(terms=terms, limit=limit)
    return _sqlite_search(terms=terms, limit=limit)


def _sqlite_search(*, terms: list[str], limit: int) -> list[SearchHit]:
    # Each word a quoted string: FTS5 reads nothing in it as an operator, so
    # "NEAR(", "-", "OR" or a lone '"' are words (or nothing), never syntax.
    match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT d.id, d.title,
                   snippet(agents_librarydocument_fts, 1, '**', '**', '…', %s)
            FROM agents_librarydocument_fts
            JOIN agents_librarydocument AS d ON d.id = agents_librarydocument_fts.rowid
            WHERE agents_librarydocument_fts MATCH %s
            -- bm25 is lower for better matches; a title match weighs 3 body matches.
            ORDER BY bm25(agents_librarydocument_fts, 3.0, 1.0), d.id
            LIMIT %s
            """,
            [SNIPPET_WORDS, match, limit],
        )
        return [SearchHit(title=title, url=f"{LIBRARY_URL_PREFIX}{pk}", snippet=snippet) for pk, title, snippet in cursor.fetchall()]


def _postgres_search(*, terms: list[str], limit: int) -> list[SearchHit]:
    # websearch syntax never raises; joined with "or" so a question's words
    # rank documents as on SQLite instead of all being required.
    query = SearchQuery(" or ".join(terms), search_type="websearch", config="english")
    documents = (
        LibraryDocument.objects.only("id", "title")
        .alias(vector=_POSTGRES_VECTOR)
        .filter(vector=query)
        .annotate(
            rank=SearchRank(_POSTGRES_VECTOR, query),
            snippet=SearchHeadline(
                "content", query, config="english", start_sel="**", stop_sel="**",
                max_words=SNIPPET_WORDS, min_words=SNIPPET_WORDS // 2, fragment_delimiter=" … ",
            ),
        )
        .order_by("-rank", "id")[:limit]
    )
    return [SearchHit(title=document.title, url=document.url, snippet=document.snippet) for document in documents]


def library_document_fetch(*, url: str) -> ToolResult:
    """A library document for web_fetch, which hands library:// URLs here."""
    match = _URL.fullmatch(url.strip())
    if match is None:
        return tool_error(tool="web_fetch", message=f"{url} is not a library URL; they look like {LIBRARY_URL_PREFIX}12.")
    document = LibraryDocument.objects.filter(pk=int(match[1])).first()
    if document is None:
        return tool_error(tool="web_fetch", message=f"There is no library document {url}; search the library for its current URL.")
    return ToolResult(
        success=True,
        content=(
            f"<page url={quoteattr(document.url)} title={quoteattr(document.title)} "
            f"content_type={quoteattr(document.content_type)}><content>{escape(document.content)}</content></page>"
        ),
        metadata={"url": document.url, "title": document.title},
    )
