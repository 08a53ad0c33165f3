"""Full-text search that works for Chinese as well as English.

Both databases' word parsers (FTS5's unicode61, Postgres's default parser)
take a run of Han characters for one word, so `效率` would never be found
inside `热泵的效率如何`. Chinese has no spaces to split words on, so the text
is indexed the way Unicode's word-boundary rules (UAX #29) and Lucene's or
Elasticsearch's standard analyzer treat it: every ideograph and kana is a word
of its own, and a query for a Chinese word is the phrase of its characters in
a row. That finds words of any length (most Chinese words have two
characters, too short for a trigram index), and Latin words keep going
through the English stemmer beside them, so "pumps" still finds "pump" and
`COP衡量` finds "COP 衡量".

The split happens inside the database, so every write path indexes the same
way: a SQL function named cjk_split, registered from Python on every SQLite
connection (the artifactflow.sqlite3 backend) and created by migration on Postgres
(a regexp_replace over the same ranges as CJK_RANGES below, which
tests.artifactflow.test_textsearch checks). A Postgres tsvector keeps 256
positions of each word, so there a very long Chinese text is found by a
word in about its first 256 uses of each of the word's characters.
"""

import re
import unicodedata
from itertools import pairwise

# Han (unified, extension A, compatibility, the supplementary planes'
# extensions), hiragana and katakana. Hangul is left alone: Korean puts
# spaces between its words.
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
CJK_CHARACTER = re.compile(f"[{CJK_RANGES}]")

# Letters and digits, as both databases' parsers see a word ("_" separates).
_WORD = re.compile(r"[^\W_]+")
# A character that only shapes a question (particles, question words,
# pronouns): as a stop word does in English, it splits a question into the
# parts that name its topic. None that starts or ends many content words
# (能 of 储能, 有 of 有效) is here.
CHINESE_STOP_CHARACTERS = frozenset("的了吗呢吧啊呀和与及或是在把被么怎样哪请我你他她它们这那些什如何为也就都")
# Inserted around each CJK character; snippet_join takes them out again.
_SPLIT = " "


def cjk_split(text: str | None) -> str | None:
    """The text with a space on each side of every CJK character: what both
    databases index, so each character is a word of its own."""
    if not text or not CJK_CHARACTER.search(text):
        return text
    return CJK_CHARACTER.sub(lambda match: f"{_SPLIT}{match[0]}{_SPLIT}", text)


def snippet_join(text: str, *, marks: tuple[str, str]) -> str:
    """A snippet cut from cjk_split text, with the spaces beside CJK
    characters taken out again, and a match the split marked character by
    character marked once."""
    start, stop = marks
    pieces = re.findall(f"{re.escape(start)}|{re.escape(stop)}| +|.", text, flags=re.DOTALL)

    def beside(index: int, step: int) -> str:
        # The nearest character that is not a mark, on one side.
        index += step
        while 0 <= index < len(pieces) and pieces[index] in marks:
            index += step
        return pieces[index] if 0 <= index < len(pieces) else ""

    kept = []
    for index, piece in enumerate(pieces):
        if piece.startswith(" "):
            # cjk_split put one space on each side of each character.
            inserted = sum(bool(CJK_CHARACTER.match(beside(index, step))) for step in (-1, 1))
            piece = piece[inserted:]
        kept.append(piece)
    return "".join(kept).replace(stop + start, "")


def search_words(query: str, *, limit: int) -> list[list[str]]:
    """The query's words, each as the list of tokens it is indexed as: an
    English word is one token, a run of Chinese its characters, so it must be
    matched as a phrase. At most `limit` words; the syntax of the query is
    never read, only its letters and digits."""
    return [cjk_split(word).split() for word in _WORD.findall(query)[:limit]]


def search_terms(query: str, *, limit: int, stop_words: frozenset[str]) -> list[list[str]]:
    """The terms a question is scored by, each a list of tokens to be found
    as a phrase: its English words less stop words, lowercased, and for its
    Chinese, every two characters in a row of the parts between stop
    characters (or a part's single character), as Lucene's CJK analyzer does
    for lack of a dictionary. Each term once, at most `limit`."""
    terms: dict[tuple[str, ...], None] = {}
    for word in _WORD.findall(query):
        for part in re.split(f"([{CJK_RANGES}]+)", word.lower()):
            if CJK_CHARACTER.match(part):
                terms.update(dict.fromkeys(_chinese_terms(part)))
            elif part and part not in stop_words:
                terms.setdefault((part,), None)
    return [list(term) for term in terms][:limit]


def _chinese_terms(text: str):
    """Each two characters in a row between the stop characters, and a lone one."""
    for run in re.split(f"[{''.join(CHINESE_STOP_CHARACTERS)}]+", text):
        if len(run) == 1:
            yield (run,)
        yield from pairwise(run)


def words_counted(terms: list[list[str]]) -> float:
    """About how many words the terms stand for: a Chinese word is about two
    characters, so overlapping pairs count half a word each."""
    return sum(1 if len(term) == 1 else 0.5 for term in terms)


def fts5_phrase(tokens: list[str], *, prefix: bool = False) -> str:
    """An FTS5 phrase: one quoted string, so no token is read as an operator
    (tokens hold letters and digits only, never a quote)."""
    return f'"{" ".join(tokens)}"' + ("*" if prefix else "")


def tsquery_phrase(tokens: list[str], *, prefix: bool = False, weights: str = "") -> str:
    """A to_tsquery phrase: each token quoted, each next to the one before;
    the last a prefix with `prefix`, each only where a tsvector gave it one
    of `weights` (letters A to D)."""
    phrase = [f"'{token}'" + (f":{weights}" if weights else "") for token in tokens]
    if prefix:
        phrase[-1] = f"'{tokens[-1]}':*{weights}"
    return " <-> ".join(phrase)


# What a quotation's words are made of: everything else (spaces, punctuation,
# quotation marks, dashes, symbols) may differ between a quote and its source.
_NOT_WORDS = re.compile(r"[\W_]+")


def words_comparable(text: str) -> str:
    """The text's letters and digits only, in one form (NFKC: full-width
    letters and digits as ASCII; case folded), so that a quotation is found in
    its source however either spells its spaces and punctuation: "COP, 3.1"
    in "cop 3.1", “每千瓦一千二百元” in 每千瓦一千二百元。 Linear in the text."""
    return _NOT_WORDS.sub("", unicodedata.normalize("NFKC", text).casefold())


def words_comparable_span(text: str, quote: str) -> tuple[int, int] | None:
    """Where in `text` the quotation is, compared as words_comparable
    compares them: the span from its first letter or digit to its last; None
    when it is not there. Linear in the text."""
    needle = words_comparable(quote)
    if not needle:
        return None
    kept, positions = [], []
    for position, char in enumerate(text):
        for comparable in words_comparable(char):
            kept.append(comparable)
            positions.append(position)
    found = "".join(kept).find(needle)
    if found < 0:
        return None
    return positions[found], positions[found + len(needle) - 1] + 1
