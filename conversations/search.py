"""Full-text search over one user's conversations: their titles, questions,
answers and artifact text. Results are the matching conversations, newest
first and paged like the list, each with a snippet showing where it matched.

The indexes are migration 0004's: FTS5 tables on SQLite, stored tsvector
columns with GIN indexes on Postgres, as library.selectors searches the library,
both with each Chinese character a word of its own (artifactflow.textsearch).
Both take the user's words, never their syntax, so no query can fail; every
word must match (a Chinese one as the phrase of its characters) and the last
one matches as a prefix, since the list filters as the user types. The owner is a condition inside the SQL (on SQLite a column of
the index itself): another user's rows are never returned, counted or given a
snippet, and their number barely touches the time a search takes.
"""

import re
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from artifactflow.textsearch import fts5_phrase, search_words, snippet_join, tsquery_phrase

from .models import Conversation

# A search box holds a few words; a pasted page would only make the query slow.
QUERY_MAX_TERMS = 32
SNIPPET_WORDS = 12
# Postgres indexes the start of long texts only: see migration 0004, which
# names the same number.
POSTGRES_INDEXED_CHARS = 100_000

# The snippet functions put these around each match; they become <mark> only
# after the text around them is escaped.
_START, _STOP = "\x02", "\x03"
_MARKED = re.compile(f"{_START}([^{_START}{_STOP}]*){_STOP}")


def conversations_before(*, user, before: tuple[datetime, UUID] | None = None) -> QuerySet:
    """The user's conversations newest first, from just after the (updated_at,
    id) position `before` on: the order the list and search results page in.
    The id breaks ties, so a page never repeats or skips a conversation."""
    conversations = Conversation.objects.filter(owner=user).only(
        "id", "title", "updated_at", "pinned_at", "forked_from"
    )
    if before is not None:
        updated_at, pk = before
        # The first condition alone seeks the (owner, updated_at) index to the
        # page, however deep; the second breaks ties.
        conversations = conversations.filter(updated_at__lte=updated_at).filter(
            Q(updated_at__lt=updated_at) | Q(pk__lt=pk)
        )
    return conversations.order_by("-updated_at", "-id")


def conversation_search(
    *, user, query: str, before: tuple[datetime, UUID] | None = None, limit: int = 50
) -> list[Conversation]:
    """Up to `limit` of the user's conversations matching every word of the
    query, newest first from `before` on, each with a `snippet` (safe HTML)."""
    terms = search_words(query, limit=QUERY_MAX_TERMS)
    if not terms or limit < 1:
        return []
    conversations = conversations_before(user=user, before=before)
    if connection.vendor == "postgresql":
        found, snippets = _postgres_search(user=user, conversations=conversations, terms=terms, limit=limit)
    else:
        found, snippets = _sqlite_search(user=user, conversations=conversations, terms=terms, limit=limit)
    for conversation in found:
        conversation.snippet = snippet_html(snippets.get(conversation.pk, ""))
    return found


def snippet_html(text: str) -> SafeString:
    """A snippet as HTML: its text escaped, its matches in <mark>."""
    marked = _MARKED.sub(r"<mark>\1</mark>", escape(snippet_join(text, marks=(_START, _STOP))))
    return mark_safe(marked.replace(_START, "").replace(_STOP, ""))


class _Fts(NamedTuple):
    """An FTS5 table of migration 0003 and how its rows name their conversation."""

    table: str
    columns: tuple[str, ...]
    join: str
    conversation: str


_SQLITE_TABLES = [
    _Fts(
        "conversations_message_fts",
        ("content", "response"),
        "JOIN conversations_message AS m ON m.id = conversations_message_fts.rowid",
        "m.conversation_id",
    ),
    _Fts(
        "artifacts_artifact_fts",
        ("title", "content"),
        "JOIN artifacts_artifact AS a ON a.id = artifacts_artifact_fts.rowid",
        "a.session_id",
    ),
    _Fts(
        "conversations_conversation_fts",
        ("title",),
        "JOIN conversations_conversation_fts_key AS k ON k.id = conversations_conversation_fts.rowid",
        "k.conversation_id",
    ),
]
_SQLITE_SNIPPET_COLUMNS = max(len(fts.columns) for fts in _SQLITE_TABLES)


def _sqlite_search(*, user, conversations: QuerySet, terms: list[list[str]], limit: int):
    # Each word a quoted phrase: FTS5 reads nothing in it as an operator, so
    # "NEAR", "AND" or "-" are words, never syntax; the * after the last one
    # makes it a prefix. The owner column keeps the search to the user's rows
    # within the index itself.
    words = " AND ".join(fts5_phrase(term, prefix=last) for last, term in _last_marked(terms))
    matches = [f'owner : "{user.pk}" AND {{{" ".join(fts.columns)}}} : ({words})' for fts in _SQLITE_TABLES]
    hits = " UNION ALL ".join(
        f"SELECT {fts.conversation} FROM {fts.table} {fts.join} WHERE {fts.table} MATCH %s" for fts in _SQLITE_TABLES
    )
    found = list(conversations.filter(pk__in=RawSQL(hits, matches))[:limit])
    if not found:
        return found, {}

    # One snippet a conversation, for the page only: from its latest matching
    # message, else an artifact, else its title. Each text column gives one,
    # as the column FTS5 would pick as the best may be the owner.
    ids = [conversation.pk.hex for conversation in found]
    in_page = ", ".join(["%s"] * len(ids))
    selects, params = [], []
    for source, (fts, match) in enumerate(zip(_SQLITE_TABLES, matches, strict=True)):
        texts = [f"snippet({fts.table}, {column}, %s, %s, '…', {SNIPPET_WORDS})" for column in range(len(fts.columns))]
        texts += ["NULL"] * (_SQLITE_SNIPPET_COLUMNS - len(fts.columns))
        selects.append(
            f"SELECT {fts.conversation}, {source}, {fts.table}.rowid, {', '.join(texts)} "
            f"FROM {fts.table} {fts.join} WHERE {fts.table} MATCH %s AND {fts.conversation} IN ({in_page})"
        )
        params += [_START, _STOP] * len(fts.columns) + [match, *ids]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects) + " ORDER BY 2, 3 DESC", params)
        rows = cursor.fetchall()
    snippets = {}
    for conversation_id, _source, _rowid, *texts in rows:
        marked = next((text for text in texts if text and _START in text), None)
        if marked:
            snippets.setdefault(UUID(conversation_id), marked)
    return found, snippets


def _last_marked(terms: list[list[str]]):
    return ((index == len(terms) - 1, term) for index, term in enumerate(terms))


# ts_headline parses all it is given, and a long phrase makes it slow: it is
# given this many characters around the first word's first appearance.
SNIPPET_WINDOW, SNIPPET_BEFORE = 400, 150


def _around_anchor(text: str) -> str:
    """SQL for the part of `text` around where the query's first word
    (%(anchor)s) first appears as it was typed; all of it where the word is
    only there in another form ("pumps" found by "pump")."""
    return (
        f"(SELECT CASE WHEN at > 0 THEN substr(t, greatest(at - {SNIPPET_BEFORE}, 1), {SNIPPET_WINDOW}) ELSE t END "
        f"FROM (SELECT t, strpos(lower(t), %(anchor)s) AS at FROM (SELECT {text} AS t) AS whole) AS found)"
    )


def _postgres_search(*, user, conversations: QuerySet, terms: list[list[str]], limit: int):
    # Each word quoted, so to_tsquery reads none as an operator; a word that is
    # only a stop word drops out instead of failing.
    query = " & ".join(f"({tsquery_phrase(term, prefix=last)})" for last, term in _last_marked(terms))
    # The search_vector columns are migration 0004's. Postgres walks the
    # user's conversations newest first and checks each one's rows by its
    # index until the page is full, or collects the matches from the text
    # indexes when that is cheaper: either way by the stored vectors, never
    # recomputing one.
    matches = RawSQL(
        """
        conversations_conversation.search_vector @@ to_tsquery('english', %s)
        OR EXISTS (
            SELECT 1 FROM conversations_message AS m
            WHERE m.conversation_id = conversations_conversation.id AND m.search_vector @@ to_tsquery('english', %s)
        )
        OR EXISTS (
            SELECT 1 FROM artifacts_artifact AS a
            WHERE a.session_id = conversations_conversation.id AND a.search_vector @@ to_tsquery('english', %s)
        )
        """,
        [query] * 3,
        output_field=BooleanField(),
    )
    found = list(conversations.filter(matches)[:limit])
    if not found:
        return found, {}

    # As on SQLite: from the latest matching message, else an artifact, else
    # the title. The page's matching messages and artifacts are found in one
    # scan of each table's text index, not one per conversation, and each
    # headline is made for the one row chosen.
    options = (
        f"StartSel={_START}, StopSel={_STOP}, MaxWords={SNIPPET_WORDS}, "
        f'MinWords={SNIPPET_WORDS // 2}, FragmentDelimiter=" … "'
    )
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH q AS (SELECT to_tsquery('english', %(query)s) AS query),
            messages AS (
                SELECT DISTINCT ON (m.conversation_id) m.conversation_id, m.id
                FROM conversations_message AS m, q
                WHERE m.conversation_id = ANY(%(ids)s::uuid[]) AND m.search_vector @@ q.query
                ORDER BY m.conversation_id, m.id DESC
            ),
            artifacts AS (
                SELECT DISTINCT ON (a.session_id) a.session_id, a.id
                FROM artifacts_artifact AS a, q
                WHERE a.session_id = ANY(%(ids)s::uuid[]) AND a.search_vector @@ q.query
                ORDER BY a.session_id, a.id DESC
            )
            SELECT c.id, ts_headline(
                'english',
                cjk_split(CASE WHEN m.id IS NOT NULL THEN {around_message} WHEN a.id IS NOT NULL THEN {around_artifact} ELSE c.title END),
                q.query,
                %(options)s
            )
            FROM conversations_conversation AS c CROSS JOIN q
            LEFT JOIN messages ON messages.conversation_id = c.id
            LEFT JOIN conversations_message AS m ON m.id = messages.id
            LEFT JOIN artifacts ON artifacts.session_id = c.id
            LEFT JOIN artifacts_artifact AS a ON a.id = artifacts.id
            WHERE c.id = ANY(%(ids)s::uuid[])
            """.format(
                around_message=_around_anchor("m.content || ' ' || left(m.response, %(chars)s)"),
                around_artifact=_around_anchor("a.title || ' ' || left(a.content, %(chars)s)"),
            ),
            {
                "query": query,
                "chars": POSTGRES_INDEXED_CHARS,
                "options": options,
                "ids": [c.pk for c in found],
                "anchor": "".join(terms[0]).lower(),
            },
        )
        return found, dict(cursor.fetchall())
