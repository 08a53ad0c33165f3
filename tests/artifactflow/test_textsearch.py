import importlib
import threading

import pytest
from django.db import connection

from artifactflow.textsearch import (
    CJK_RANGES,
    cjk_split,
    search_terms,
    search_words,
    snippet_join,
    tsquery_phrase,
    words_comparable,
    words_comparable_span,
    words_counted,
)
from conversations.models import Message
from tests.factories import MessageFactory

MARKS = ("\x02", "\x03")


@pytest.mark.parametrize(
    "text",
    [
        "空气源热泵在零下十五度时效率下降。",
        "热泵的效率用COP衡量 heat pumps 使用 Python 编写",
        "ひらがなとカタカナ、한국어 단어",
        "English only, untouched",
        "",
    ],
)
def test_a_snippet_of_split_text_reads_as_the_text_did(text):
    assert snippet_join(cjk_split(text), marks=MARKS) == text


def test_each_cjk_character_is_a_word_and_hangul_words_stay_whole():
    assert cjk_split("COP衡量").split() == ["COP", "衡", "量"]
    assert cjk_split("한국어 단어").split() == ["한국어", "단어"]
    assert cjk_split("𠀀字").split() == ["𠀀", "字"]  # a character beyond the basic plane


def test_a_match_marked_character_by_character_is_marked_once():
    marked = cjk_split("热泵的效率").replace("效", "\x02效\x03").replace("率", "\x02率\x03")

    assert snippet_join(marked, marks=MARKS) == "热泵的\x02效率\x03"
    assert snippet_join("**热** **泵** 的", marks=("**", "**")) == "**热泵**的"


def test_a_query_word_is_the_phrase_of_its_characters():
    assert search_words("热泵的效率 COP衡量, pumps!", limit=32) == [
        ["热", "泵", "的", "效", "率"],
        ["COP", "衡", "量"],
        ["pumps"],
    ]
    assert len(search_words("词 " * 100, limit=32)) == 32


def test_a_chinese_question_is_scored_by_the_pairs_between_its_particles():
    terms = search_terms("热泵在寒冷气候中的效率如何？Heat the pumps", limit=32, stop_words=frozenset({"the"}))

    assert terms == [
        ["热", "泵"],
        ["寒", "冷"],
        ["冷", "气"],
        ["气", "候"],
        ["候", "中"],
        ["效", "率"],
        ["heat"],
        ["pumps"],
    ]
    assert words_counted(terms) == 5
    assert search_terms("的了吗", limit=32, stop_words=frozenset()) == []
    assert search_terms("热，泵", limit=32, stop_words=frozenset()) == [["热"], ["泵"]]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="tsquery is Postgres's")
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "weights", "prefix", "found"),
    [
        ("热泵", "", False, True),
        ("热泵", "A", False, True),
        ("热泵", "C", False, False),
        ("效率", "C", False, True),
        ("效率", "A", False, False),
        ("pump", "A", True, True),
        ("pump", "C", True, False),
    ],
)
def test_a_weighted_phrase_matches_only_where_its_words_have_that_weight(query, weights, prefix, found):
    # A title (weight A) and a text (C), as the library's passages are indexed.
    title, text = "热泵 pumps", "COP衡量热的效率"
    [term] = search_words(query, limit=1)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (setweight(to_tsvector('english', cjk_split(%s)), 'A')"
            " || setweight(to_tsvector('english', cjk_split(%s)), 'C')) @@ to_tsquery('english', %s)",
            [title, text, tsquery_phrase(term, prefix=prefix, weights=weights)],
        )
        assert cursor.fetchone()[0] is found


def test_postgres_splits_the_same_characters_as_sqlite():
    pattern = importlib.import_module("conversations.migrations.0004_search_cjk").POSTGRES_CJK_PATTERN

    assert pattern.encode().decode("unicode_escape") == f"([{CJK_RANGES}])"


@pytest.mark.skipif(connection.vendor != "sqlite", reason="Postgres has cjk_split from its migration")
@pytest.mark.django_db(transaction=True)
def test_a_connection_any_thread_opens_can_write_what_the_search_triggers_index():
    errors = []

    def write():
        try:
            MessageFactory(content="热泵的效率")
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()

    assert errors == [] and Message.objects.filter(content="热泵的效率").exists()


@pytest.mark.parametrize(
    ("text", "quote", "span"),
    [
        ("kept homes at 20 °C down to −15 °C outside.", "at 20 °C, down to -15 °C outside", (11, 42)),
        ("价格为每千瓦一千二百元，比去年下降了百分之八。", "每千瓦一千二百元 比去年下降了百分之八", (3, 22)),
        ("The SCOP was 3.1 here", "ｔｈｅ ＳＣＯＰ ｗａｓ ３.１", (0, 16)),
        ("价格为每千瓦一千二百元。", "每千瓦八百元", None),
        ("anything", "“ … ”", None),
    ],
)
def test_a_quotation_is_found_whatever_its_spaces_punctuation_and_widths(text, quote, span):
    assert words_comparable_span(text, quote) == span
    if span is not None:
        assert words_comparable(quote) == words_comparable(text[span[0] : span[1]])
