"""The team library's reads: the documents a person may see (and their
agents find), their pages, and full-text search by passage.

Search is full-text in the database itself, so the embedded default needs no
search server: FTS5 with bm25 on SQLite, tsvector with ts_rank on Postgres,
both with each Chinese character a word of its own (artifactflow.textsearch;
the indexes are agents' migration 0009's, from when the library was part of
agents). Both take the user's words, never their syntax, so no query can
fail, and both apply the same relevance cut-off (library_search), so a
question the library does not cover finds nothing rather than weak hits.
Documents are judged relevant as wholes, and the hits are their passages
(library.passages) that best match the question, so a question finds the part
of a 200-page document that answers it.
"""

import re
from dataclasses import dataclass
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from artifactflow.markdown import code_render, markdown_render, passage_mark, text_render
from artifactflow.textsearch import fts5_phrase, search_terms, snippet_join, tsquery_phrase, words_counted
from conversations.models import Conversation
from conversations.selectors import conversation_viewable
from projects.access import project_readable
from projects.models import Project

from .models import LIBRARY_URL_PREFIX, LibraryDocument, LibraryPassage, WebSnapshot
from .vectors import VECTOR_CANDIDATES, vectors_nearest, vectors_query

# A question a model or person types has a handful of words; a pasted page
# would only make the query slow.
QUERY_MAX_TERMS = 32
SNIPPET_WORDS = 24
# A search's hits from one document at most: a question's answer is seldom in
# more, and other documents' best passages come before its next ones.
PASSAGES_PER_DOCUMENT = 3
# A document's passages after its best are hits only when they score at least
# this share of it: a passage that only shares the document's common words is
# no second answer.
PASSAGE_SCORE_SHARE = 0.5
# Reciprocal rank fusion's constant (Cormack et al.): a place's weight is 1 / (RRF_K + place).
RRF_K = 60
# A passage near the question by meaning, in a document none of its words made
# relevant, counts only when its cosine similarity is at least this.
VECTOR_ALONE_SIMILARITY = 0.8
# The passages of this many of the relevant documents (those with the most of
# the question's words) are ranked, or of as many as are asked for: a question
# whose words are common would otherwise rank every passage of the library.
RANKED_DOCUMENTS = 50

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
_URL = re.compile(re.escape(LIBRARY_URL_PREFIX) + r"(\d+)/?(?:#(\d+))?")
_SNIPPET_MARKS = ("**", "**")
# What a link to a document carries of the passage to mark on its page: a
# search's snippet is a few dozen words.
PASSAGE_MAX_CHARS = 300
# The Library page lists this many documents; a search finds the others.
LIST_LIMIT = 100
# A document's page shows this much of its text: enough for a book chapter,
# little enough for a phone to lay out.
PAGE_MAX_CHARS = 200_000


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str
    # Where a library passage is in its document: its headings, a PDF's page.
    heading: str = ""
    page: int | None = None


@dataclass(frozen=True)
class LibraryItem:
    """A document as the Library page lists it, with the snippet a search found."""

    document: LibraryDocument
    snippet: str = ""
    # Whether the person listing it may remove it (and read a failed one again).
    removable: bool = False

    @property
    def href(self) -> str:
        return library_page_url(document_id=self.document.pk, passage=self.snippet.replace("**", ""))

    @property
    def snippet_html(self) -> SafeString:
        """The snippet with the words the search matched marked (between the
        library's ** marks); everything else escaped."""
        pieces = self.snippet.split("**")
        return format_html_join(
            "",
            "{}",
            ((format_html("<mark>{}</mark>", piece) if index % 2 else piece,) for index, piece in enumerate(pieces)),
        )


def library_page_url(*, document_id: int, passage: str = "", number: int | None = None) -> str:
    """The document's page, where a browser can read it; with a passage (a
    search's snippet) that the page marks and scrolls to, else with the
    passage of that `number` (library://<id>#<number>) marked."""
    url = reverse("library-document", args=[document_id])
    passage = " ".join(passage.split())[:PASSAGE_MAX_CHARS]
    if passage:
        return f"{url}?{urlencode({'passage': passage})}#passage"
    return f"{url}?at={number}#passage" if number is not None else url


def library_url_id(url: str) -> int | None:
    """The document id of a library://<id> URL (or library://<id>#<passage>),
    None for any other URL."""
    match = _URL.fullmatch(url.strip())
    return int(match[1]) if match else None


def library_url_passage(url: str) -> int | None:
    """The passage number a library://<id>#<passage> URL names, else None."""
    match = _URL.fullmatch(url.strip())
    return int(match[2]) if match and match[2] else None


# library_visible's `project` for every project the user may read.
ANY_PROJECT = object()


def library_visible(*, user, project=None) -> Q:
    """The documents `user` may read, and their agents find: the team
    library's limited to no group, to one of the user's groups, or added by
    the user; and a project's own, inside it. `project`: None, the team
    library alone (its page, a turn outside any project); a project's id, that
    project's documents too (a turn in it, whose owner may read it: the
    caller's check); ANY_PROJECT, those of every project the user may read
    (a document's page, a citation's link). None (or an anonymous user) sees
    only the team documents limited to no group."""
    visible = Q(group__isnull=True)
    if user is not None and user.is_authenticated:
        visible |= Q(group__in=user.groups.all()) | Q(uploaded_by=user)
    visible &= Q(project__isnull=True)
    if project is ANY_PROJECT and user is not None:
        visible |= Q(project__in=Project.objects.filter(project_readable(user=user)).values("pk"))
    elif project is not None and project is not ANY_PROJECT:
        visible |= Q(project=project)
    return visible


def library_documents(*, user, project=None) -> QuerySet[LibraryDocument]:
    return LibraryDocument.objects.filter(library_visible(user=user, project=project))


def library_list(*, user, query: str = "", project: Project | None = None) -> list[LibraryItem]:
    """The team library's documents the user may read, or with `project` (one
    they may read: the caller's check) that project's own: newest first, or
    those a search finds, best first, each with its snippet."""
    if project is None:
        listed = library_documents(user=user)
    else:
        listed = LibraryDocument.objects.filter(project=project)
    if not query.strip():
        documents = listed.select_related("uploaded_by", "group", "project").order_by("-created_at", "-pk")
        return [
            LibraryItem(document, removable=library_document_removable(user=user, document=document))
            for document in documents[:LIST_LIMIT]
        ]
    hits = library_search(
        query=query, limit=LIST_LIMIT, user=user, per_document=1, project=project.pk if project else None
    )
    ids = [library_url_id(hit.url) for hit in hits]
    documents = listed.select_related("uploaded_by", "group", "project").in_bulk(ids)
    return [
        LibraryItem(documents[pk], hit.snippet, removable=library_document_removable(user=user, document=documents[pk]))
        for pk, hit in zip(ids, hits, strict=True)
        if pk in documents
    ]


def library_reading(items: list[LibraryItem]) -> bool:
    """Whether a worker is still reading any of the listed documents."""
    return any(item.document.status == LibraryDocument.Status.QUEUED for item in items)


def library_document_get(*, user, document_id: int) -> LibraryDocument | None:
    """A document of the team library or of a project the user may read."""
    documents = library_documents(user=user, project=ANY_PROJECT)
    return documents.select_related("uploaded_by", "group", "project").filter(pk=document_id).first()


@dataclass(frozen=True)
class DocumentPage:
    html: SafeString
    # The text was longer than the page shows.
    cut: bool
    # The passage asked for was found, and marked.
    marked: bool
    # The passage opened by its number, and how many the document has.
    opened: LibraryPassage | None = None
    passages: int = 0


def library_document_page(*, document: LibraryDocument, passage: str = "", at: int | None = None) -> DocumentPage:
    """The document's text as its page shows it: markdown rendered, other
    text as paragraphs that wrap (a PDF's as it reads, its line breaks
    spaces), code highlighted; sanitised or escaped either way, at most
    PAGE_MAX_CHARS of it, with the passage marked where the page shows it:
    the text `passage`, else the start of the passage numbered `at`."""
    opened = document.passages.filter(number=at).first() if at is not None else None
    if opened is not None and not passage.strip():
        passage = opened.text
    text = document.content[:PAGE_MAX_CHARS]
    if document.content_type == "text/markdown":
        html = markdown_render(text)
    elif document.content_type == "text/plain":
        html = text_render(text, lines_joined=document.original_file.name.lower().endswith(".pdf"))
    else:
        html = code_render(text, content_type=document.content_type)
    marked = False
    passage = passage[:PASSAGE_MAX_CHARS]
    if passage.strip():
        html, marked = passage_mark(html, passage)
    # Sanitised by markdown_render and text_render, escaped by code_render, sanitised again by passage_mark.
    return DocumentPage(
        html=SafeString(html),
        cut=len(document.content) > PAGE_MAX_CHARS,
        marked=marked,
        opened=opened,
        passages=document.passages.count() if opened is not None else 0,
    )


def snapshot_page_url(*, snapshot_id: int, quote: str = "") -> str:
    """The snapshot's page, marking `quote` (the words a citation quotes) when given."""
    url = reverse("snapshot", args=[snapshot_id])
    quote = " ".join(quote.split())[:PASSAGE_MAX_CHARS]
    return f"{url}?{urlencode({'q': quote})}#passage" if quote else url


def snapshot_get(*, user, snapshot_id: int) -> WebSnapshot | None:
    """The snapshot if `user` may read its conversation (theirs, or shared
    with them), else None: another's snapshot is one that does not exist."""
    snapshot = WebSnapshot.objects.select_related("conversation").filter(pk=snapshot_id).first()
    if snapshot is None or conversation_viewable(user=user, conversation_id=snapshot.conversation_id) is None:
        return None
    return snapshot


def snapshot_find(*, conversation: Conversation, url: str) -> WebSnapshot | None:
    """The latest snapshot of `url` in the conversation (a page read again
    after it changed has one for each text), or None. A link's URL and the
    one the page was read at may differ by a trailing slash or a fragment."""
    url = url.strip()
    base = url.split("#", 1)[0]
    candidates = {url, base, base.rstrip("/"), base.rstrip("/") + "/"}
    return (
        WebSnapshot.objects.filter(conversation=conversation, url__in=candidates).order_by("-fetched_at", "-pk").first()
    )


def snapshot_page(*, snapshot: WebSnapshot, quote: str = "") -> DocumentPage:
    """The snapshot's text as its page shows it, as a library document's
    page does: a web page's markdown rendered, a PDF's text as paragraphs,
    other text as is; at most PAGE_MAX_CHARS, with `quote` marked."""
    text = snapshot.text[:PAGE_MAX_CHARS]
    if snapshot.content_type in ("text/html", "application/xhtml+xml", "text/markdown"):
        html = markdown_render(text)
    else:
        html = text_render(text, lines_joined=snapshot.content_type == "application/pdf")
    marked = False
    quote = quote[:PASSAGE_MAX_CHARS]
    if quote.strip():
        html, marked = passage_mark(html, quote)
    # Sanitised by markdown_render and text_render, sanitised again by passage_mark.
    return DocumentPage(html=SafeString(html), cut=len(snapshot.text) > PAGE_MAX_CHARS, marked=marked)


def library_document_removable(*, user, document: LibraryDocument) -> bool:
    """Whoever added a document may remove it, a project's owner any of its
    own; staff may remove any they can see."""
    if document.project_id is not None and document.project.owner_id == user.pk:
        return True
    return user.is_staff or (document.uploaded_by_id is not None and document.uploaded_by_id == user.pk)


def library_search(
    *, query: str, limit: int, user=None, per_document: int = PASSAGES_PER_DOCUMENT, project: int | None = None
) -> list[SearchHit]:
    """The passages relevant to the query in documents that `user` may read
    (library_visible, with the `project`'s), best first, at most `per_document` from a document.

    A document is relevant or not as a whole, and relevance is counted, not
    read off the rank: bm25 and ts_rank have different scales, and both give
    some rank to any document that shares one common word with the question.
    Each meaningful word of the query (stop words dropped) earns a document a
    point if the document contains it, in any form the database's stemmer
    joins, and a second point if its title does. A document is relevant when
    its points exceed half the number of words: a majority of the words in
    its text, or about one word in four in its title. So "benefits of heat
    pumps compared to gas boilers" (6 words) finds the document titled Heat
    pumps (4 points), but "write a cover letter for a job application" (5
    words) misses the SQLite document that mentions writes and web
    applications (2 points).

    A Chinese question has no spaces: its words are taken to be the pairs
    of characters in a row between its particles (search_terms), each pair
    half a word. So "寒冷地区热泵效率怎么样" (7 pairs, 3.5 words) finds the
    document with 寒冷, 热泵 and 效率 in its text (3 points).

    The relevant documents' passages that hold any of the words are then
    ranked by the words in their text, a rare word counting more than a
    common one (bm25 on SQLite; on Postgres, whose ranks have no such weight,
    an idf over these passages), a word only in the title or headings a fifth
    as much: the title already chose the document, and every passage of it
    shares that. A document's best passage is a hit; its next ones only when
    they score at least PASSAGE_SCORE_SHARE of that.
    """
    terms = search_terms(query, limit=QUERY_MAX_TERMS, stop_words=STOP_WORDS)
    if not terms or limit < 1 or per_document < 1:
        return []
    search = _postgres_search if connection.vendor == "postgresql" else _sqlite_search
    # The rule in SQL, to filter the raw queries below by.
    visible = library_documents(user=user, project=project).values("pk").query.sql_with_params()
    hits, best = [], {}
    vector = vectors_query(query=query)
    if vector is not None:
        # Fused, the words' ranking of all the passages counts, not only of a document's best few.
        rows = search(terms=terms, limit=max(limit, VECTOR_CANDIDATES), per_document=VECTOR_CANDIDATES, visible=visible)
        rows = _fused(rows=rows, vector=vector, limit=limit, per_document=per_document, user=user, project=project)
    else:
        rows = search(terms=terms, limit=limit, per_document=per_document, visible=visible)
    # Best first, so a document's first row is its best.
    for document_id, number, title, heading, page, snippet, score in rows:
        if vector is None and score < best.setdefault(document_id, score) * PASSAGE_SCORE_SHARE:
            continue
        hits.append(
            SearchHit(
                title=title,
                url=f"{LIBRARY_URL_PREFIX}{document_id}#{number}",
                snippet=snippet_join(snippet, marks=_SNIPPET_MARKS),
                heading=heading,
                page=page,
            )
        )
    return hits


def _fused(*, rows: list, vector: list[float], limit: int, per_document: int, user, project: int | None) -> list:
    """The full-text rows and the passages by their nearness to the question
    in one ranking (reciprocal rank fusion: each ranking gives a passage
    1 / (60 + its place)), at most `per_document` of a document and `limit`
    in all. The words rank passages across the library; nearness ranks them
    within their document: a team's reports share an outline, and the same
    section of another site's report is as near as the answer, so the words
    (the site's name) choose the document and its meaning the passage in it
    (measured: benchmarks/retrieval.py). Nearness counts in the documents the
    question's words made relevant, and elsewhere only as near as
    VECTOR_ALONE_SIMILARITY, when the words made none relevant: the nearest
    passages of a library that does not cover the question are still far."""
    fused: dict[tuple[int, int], list] = {}
    for place, row in enumerate(rows, start=1):
        fused[row[0], row[1]] = [*row[:6], 1 / (RRF_K + place)]
    relevant = {row[0] for row in rows}
    within = list(LibraryPassage.objects.filter(document_id__in=relevant).values_list("pk", flat=True))
    distances = vectors_nearest(vector=vector, within=within)
    readable = library_documents(user=user, project=project).filter(status=LibraryDocument.Status.INDEXED)
    placed = sorted(
        LibraryPassage.objects.filter(pk__in=distances, document__in=readable).values_list(
            "pk", "document_id", "number"
        ),
        key=lambda passage: distances[passage[0]],
    )
    places: dict[int, int] = {}
    unread: dict[int, list] = {}
    for pk, document_id, number in placed:
        if document_id not in relevant and 1 - distances[pk] < VECTOR_ALONE_SIMILARITY:
            continue
        place = places[document_id] = places.get(document_id, 0) + 1
        entry = fused.get((document_id, number))
        if entry is None and place <= per_document:
            # Nearness alone brings it: its fields are read below, for those few only.
            entry = fused[document_id, number] = unread[pk] = [document_id, number, "", "", None, "", 0.0]
        if entry is not None:
            entry[6] += 1 / (RRF_K + place)
    for pk, title, heading, page, text in LibraryPassage.objects.filter(pk__in=unread).values_list(
        "pk", "title", "heading", "page", "text"
    ):
        opening = " ".join(text.split()[:SNIPPET_WORDS]) if " " in text.strip() else text[: SNIPPET_WORDS * 2]
        unread[pk][2:6] = [title, heading, page, opening]
    chosen, taken = [], {}
    for entry in sorted(fused.values(), key=lambda entry: -entry[6]):
        if taken.get(entry[0], 0) >= per_document:
            continue
        taken[entry[0]] = taken.get(entry[0], 0) + 1
        chosen.append(tuple(entry))
        if len(chosen) == limit:
            break
    return chosen


def _sqlite_search(
    *, terms: list[list[str]], limit: int, per_document: int, visible: tuple[str, tuple]
) -> list[tuple[int, int, str, str, int | None, str, float]]:
    phrases = [fts5_phrase(term) for term in terms]
    # A row per term a document contains and another per term its title
    # contains: a document's points are its rows.
    points = " UNION ALL ".join(
        ["SELECT rowid AS id FROM agents_librarydocument_fts WHERE agents_librarydocument_fts MATCH %s"]
        * (2 * len(terms))
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH points AS ({points})
            SELECT id FROM points WHERE id IN ({visible[0]})
            GROUP BY id HAVING 2 * COUNT(*) > %s ORDER BY COUNT(*) DESC, id LIMIT %s
            """,
            [
                *phrases,
                *(f"title : {phrase}" for phrase in phrases),
                *visible[1],
                words_counted(terms),
                max(limit, RANKED_DOCUMENTS),
            ],
        )
        relevant = [document_id for (document_id,) in cursor.fetchall()]
        if not relevant:
            return []
        # Within the index, the passages of those documents that hold any of the words.
        match = f"({' OR '.join(phrases)}) AND document : ({' OR '.join(f'd{pk}' for pk in relevant)})"
        cursor.execute(
            """
            WITH ranked AS (
                -- bm25 is lower for better matches; the document column is no words.
                SELECT rowid AS id, bm25(library_librarypassage_fts, 0.2, 0.2, 1.0, 0.0) AS rank
                FROM library_librarypassage_fts WHERE library_librarypassage_fts MATCH %s
            ),
            placed AS (
                SELECT ranked.id, ranked.rank,
                       row_number() OVER (PARTITION BY p.document_id ORDER BY ranked.rank, ranked.id) AS place
                FROM ranked JOIN library_librarypassage AS p ON p.id = ranked.id
            ),
            best AS (SELECT id, rank FROM placed WHERE place <= %s ORDER BY rank, id LIMIT %s)
            -- A snippet for the passages shown alone: making one is most of a match's cost.
            SELECT p.document_id, p.number, d.title, p.heading, p.page,
                   snippet(library_librarypassage_fts, 2, %s, %s, '…', %s), -best.rank
            FROM library_librarypassage_fts
            JOIN best ON best.id = library_librarypassage_fts.rowid
            JOIN library_librarypassage AS p ON p.id = best.id
            JOIN agents_librarydocument AS d ON d.id = p.document_id
            WHERE library_librarypassage_fts MATCH %s
            ORDER BY best.rank, best.id
            """,
            [match, per_document, limit, *_SNIPPET_MARKS, SNIPPET_WORDS, match],
        )
        return cursor.fetchall()


def _postgres_search(
    *, terms: list[list[str]], limit: int, per_document: int, visible: tuple[str, tuple]
) -> list[tuple[int, int, str, str, int | None, str, float]]:
    # websearch syntax never raises, and reads a quoted string as a phrase;
    # joined with "or" so a question's words rank documents as on SQLite
    # instead of all being required.
    phrases = [" ".join(term) for term in terms]
    query = " or ".join(f'"{phrase}"' for phrase in phrases)
    # Points are counted on the vector each document holds (agents' migration
    # 0009): parsing a document once per word would make a long question
    # slow. A term is in the title when it is there with the title's weight, A.
    points = " + ".join(
        ["(search_vector @@ phraseto_tsquery('english', %s))::int + (search_vector @@ to_tsquery('english', %s))::int"]
        * len(terms)
    )
    # Each term as a phrase, and as the phrase in the text alone (each token's
    # weight C) and in the title alone (A).
    terms_sql = ", ".join(
        ["(%s, phraseto_tsquery('english', %s), to_tsquery('english', %s), to_tsquery('english', %s))"] * len(terms)
    )
    headline = (
        f"StartSel='**', StopSel='**', MaxWords={SNIPPET_WORDS}, MinWords={SNIPPET_WORDS // 2}, FragmentDelimiter=' … '"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH q AS (SELECT websearch_to_tsquery('english', %s) AS query),
            candidates AS MATERIALIZED (
                SELECT id, search_vector FROM agents_librarydocument, q
                WHERE search_vector @@ q.query AND id IN ({visible[0]})
            ),
            -- Those that cover the most of the question, whose passages are ranked.
            relevant AS (
                SELECT id FROM (SELECT id, ({points}) AS points FROM candidates) AS counted
                WHERE 2 * points > %s ORDER BY points DESC, id LIMIT %s
            ),
            terms (term, query, in_text, in_title) AS (VALUES {terms_sql}),
            passages AS MATERIALIZED (
                SELECT p.id, p.document_id, p.search_vector FROM library_librarypassage AS p, q
                WHERE p.document_id IN (SELECT id FROM relevant) AND p.search_vector @@ q.query
            ),
            -- Which terms each passage holds: in its text (weight C), or only
            -- in its headings (B), which count a fifth as much; a term in its
            -- document's title (A) counts again, for every passage of it alike,
            -- so a document named for the question leads one that mentions it.
            -- And how many of the passages hold each term.
            hits AS (
                SELECT passages.id, passages.document_id, terms.term,
                       CASE WHEN passages.search_vector @@ terms.in_text THEN 1.0 ELSE 0.2 END
                       + CASE WHEN passages.search_vector @@ terms.in_title THEN 1.0 ELSE 0.0 END AS hit,
                       count(*) OVER (PARTITION BY terms.term) AS holding
                FROM passages CROSS JOIN terms WHERE passages.search_vector @@ terms.query
            ),
            -- A term counts by how rare it is among these passages (an idf):
            -- Postgres' own ranks weigh every word alike.
            scored AS (
                SELECT id, document_id, sum(hit * ln(1 + (SELECT count(*) FROM passages)::float / holding)) AS rank
                FROM hits GROUP BY id, document_id
            ),
            placed AS (
                SELECT id, rank, row_number() OVER (PARTITION BY document_id ORDER BY rank DESC, id) AS place
                FROM scored
            ),
            best AS (SELECT id, rank FROM placed WHERE place <= %s ORDER BY rank DESC, id LIMIT %s)
            SELECT p.document_id, p.number, d.title, p.heading, p.page,
                   ts_headline('english', cjk_split(p.text), q.query, %s), best.rank
            FROM best JOIN library_librarypassage AS p USING (id)
            JOIN agents_librarydocument AS d ON d.id = p.document_id, q
            ORDER BY best.rank DESC, best.id
            """,
            [
                query,
                *visible[1],
                *(
                    value
                    for phrase, term in zip(phrases, terms, strict=True)
                    for value in (phrase, tsquery_phrase(term, weights="A"))
                ),
                words_counted(terms),
                max(limit, RANKED_DOCUMENTS),
                *(
                    value
                    for index, (phrase, term) in enumerate(zip(phrases, terms, strict=True))
                    for value in (index, phrase, tsquery_phrase(term, weights="C"), tsquery_phrase(term, weights="A"))
                ),
                per_document,
                limit,
                headline,
            ],
        )
        return cursor.fetchall()
