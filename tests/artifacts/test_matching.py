import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from artifacts.matching import FUZZY_MAX_OLD_LEN, compute_update


def _prose(size: int, *, seed: int) -> str:
    rnd = random.Random(seed)
    syllables = ["ka", "to", "ri", "men", "sal", "or", "ve", "qui", "an", "pel", "dor", "is", "ux", "thon", "ber"]
    sentences, length = [], 0
    while length < size:
        words = ("".join(rnd.choice(syllables) for _ in range(rnd.randint(1, 3))) for _ in range(rnd.randint(6, 16)))
        sentence = " ".join(words).capitalize() + (".\n\n" if rnd.random() < 0.15 else ". ")
        sentences.append(sentence)
        length += len(sentence)
    return "".join(sentences)[:size]


def _replaced(content, start, end, new):
    return content[:start] + new + content[end:]


def _distances(old: str, content: str) -> list[int]:
    """For every end position in content, the least edit distance from old to
    a substring ending there (Sellers' semi-global alignment), the slow way."""
    previous = [0] * (len(content) + 1)
    for i, char in enumerate(old, start=1):
        current = [i] + [0] * len(content)
        for j, other in enumerate(content, start=1):
            current[j] = min(previous[j - 1] + (char != other), previous[j] + 1, current[j - 1] + 1)
        previous = current
    return previous


# Layer 0, exact


def test_a_unique_exact_occurrence_is_replaced():
    result = compute_update("one two three", "two", "2")
    assert result.ok
    assert (result.layer, result.similarity, result.span, result.error) == ("exact", 1.0, (4, 7), "")
    assert result.new_content == "one 2 three"


def test_several_exact_occurrences_are_refused_with_their_count():
    result = compute_update("a cat, a cat, a cat", "a cat", "a dog")
    assert not result.ok
    assert result.new_content is None and result.span is None
    assert result.layer == "exact"
    assert "occurs 3 times" in result.error and "more surrounding text" in result.error


def test_overlapping_occurrences_are_several():
    result = compute_update("xaaay", "aa", "b")
    assert not result.ok
    assert "occurs 2 times" in result.error


def test_an_empty_old_str_is_refused():
    result = compute_update("anything", "", "new")
    assert not result.ok and result.new_content is None
    assert "must not be empty" in result.error


# Layer 1, normalised


def test_straight_quotes_match_curly_ones():
    content = "She said “it’s fine” and left."
    result = compute_update(content, '"it\'s fine"', "“it’s done”")
    assert (result.ok, result.layer, result.similarity) == (True, "normalized", 1.0)
    assert result.span == (9, 20)
    assert result.new_content == "She said “it’s done” and left."


def test_curly_quotes_in_old_str_match_straight_ones():
    result = compute_update('say "hello" twice', "say “hello”", "shout “hello”")
    assert result.layer == "normalized"
    assert result.new_content == "shout “hello” twice"


def test_dashes_match_a_hyphen():
    result = compute_update("pages 10–20 — roughly", "10-20 - roughly", "ten to twenty")
    assert result.layer == "normalized"
    assert result.new_content == "pages ten to twenty"


def test_special_spaces_match_a_space():
    content = "100\u00a0km and 5\u202fkg and 3\u2009m"
    result = compute_update(content, "5 kg and 3 m", "more")
    assert result.layer == "normalized"
    assert result.new_content == "100\u00a0km and more"


def test_trailing_blanks_and_carriage_returns_are_ignored():
    content = "first line   \r\nsecond line\t\r\nthird"
    result = compute_update(content, "first line\nsecond line", "merged")
    assert result.layer == "normalized"
    # The blanks after the match are outside it and stay.
    assert result.new_content == "merged\t\r\nthird"


def test_spaces_between_cjk_and_latin_are_ignored():
    result = compute_update("我们用 Python 写代码", "用Python写", "用 Rust 写")
    assert result.layer == "normalized"
    assert result.new_content == "我们用 Rust 写代码"
    assert compute_update("中文word", "中文 word", "X").new_content == "X"


def test_fullwidth_letters_match_ascii_one_for_one():
    content = "型番ＡＢＣ１２３です"
    whole = compute_update(content, "ABC123", "XYZ")
    assert whole.layer == "normalized" and whole.span == (2, 8)
    assert whole.new_content == "型番XYZです"
    # Each fullwidth letter is one character of the normalised text, so a
    # match may start or end between them.
    part = compute_update(content, "BC1", "-")
    assert part.span == (3, 6)


def test_text_outside_a_normalised_match_is_unchanged():
    content = "He said “hi” — and ‘bye’.\u00a0End “quote”"
    result = compute_update(content, '"hi" - and', "X")
    assert result.layer == "normalized"
    start, end = result.span
    assert content[start:end] == "“hi” — and"
    assert result.new_content == "He said X ‘bye’.\u00a0End “quote”"


def test_several_normalised_matches_are_refused_with_their_count():
    result = compute_update("“a” and “a” and “a”", '"a"', "b")
    assert not result.ok and result.new_content is None
    assert result.layer == "normalized"
    assert "3 places" in result.error


def test_an_expanded_character_matches_only_whole():
    content = "Chapter Ⅳ: the return"
    whole = compute_update(content, "Chapter IV", "Chapter 4")
    assert whole.layer == "normalized"
    assert whole.new_content == "Chapter 4: the return"
    # 'Ⅳ' normalises to 'IV'; a match starting at its 'V' cannot be mapped
    # back, so layer 1 passes and the approximate layer replaces all of 'Ⅳ'.
    inside = compute_update(content, "V: the return", "V: the end")
    assert (inside.layer, inside.span) == ("fuzzy", (8, 21))
    assert inside.new_content == "Chapter V: the end"


def test_a_lone_letter_inside_an_expanded_character_is_not_found():
    result = compute_update("Chapter Ⅳ", "V", "5")
    assert not result.ok and result.layer == "fuzzy"


def test_a_ligature_is_matched_whole():
    assert compute_update("the ﬁnal word", "final", "last").new_content == "the last word"
    inside = compute_update("the ﬁnal word", "inal word", "x")
    assert (inside.layer, inside.new_content) == ("fuzzy", "the x")


def test_a_composed_character_maps_back_to_all_its_parts():
    content = "cafe\u0301 au lait"  # e + combining acute, composed by NFKC
    result = compute_update(content, "café au", "tea")
    assert result.layer == "normalized"
    assert result.span == (0, 8)
    assert result.new_content == "tea lait"


# Layer 2, approximate


def test_a_few_typos_are_accepted_with_their_similarity():
    content = "Intro.\nThe quick brown fox jumps over the lazy dog near the river.\nOutro."
    old = "The quikc brown fox jumps ovr the lazy dog"
    result = compute_update(content, old, "A slow red fox")
    assert (result.ok, result.layer) == (True, "fuzzy")
    assert result.new_content == "Intro.\nA slow red fox near the river.\nOutro."
    # quikc→quick is two substitutions, ovr→over one insertion.
    assert result.similarity == 1 - 3 / len(old)


def test_an_edit_at_the_edge_takes_the_differing_character_with_it():
    result = compute_update("Hello wurld!", "Hello world", "Goodbye")
    assert result.new_content == "Goodbye!"


def test_too_different_text_is_refused_with_the_closest_similarity():
    result = compute_update(_prose(5_000, seed=1), "Completely unrelated words about nothing in particular", "x")
    assert not result.ok and result.new_content is None
    assert result.layer == "fuzzy"
    assert result.similarity < 0.7
    assert f"{result.similarity:.0%} similar" in result.error


def test_two_equally_good_places_are_refused():
    paragraph = "The committee approved the budget for next year.\n"
    content = paragraph + _prose(2_000, seed=2) + "\n" + paragraph
    result = compute_update(content, "The committee aproved the budget for next year.", "x")
    assert not result.ok and result.new_content is None
    assert "equally well" in result.error


def test_a_typo_in_a_megabyte_document_is_found():
    content = _prose(1_000_000, seed=3)
    start = 600_000
    original = content[start : start + 200]
    old = list(original)
    for i in (10, 50, 90, 130, 170):
        old[i] = "#"
    result = compute_update(content, "".join(old), "REPLACED")
    assert (result.ok, result.layer, result.span) == (True, "fuzzy", (start, start + 200))
    assert result.similarity == 1 - 5 / 200
    assert result.new_content == _replaced(content, start, start + 200, "REPLACED")


def test_a_long_old_str_in_a_repetitive_table_gives_up_or_refuses():
    table = "| id | name | status |\n" + "| 17 | widget | active |\n" * 45_000
    old = list(table[300_000:304_000])
    for i in range(0, 4_000, 400):
        old[i] = "?"
    result = compute_update(table, "".join(old), "x")
    assert not result.ok and result.new_content is None


def test_a_typo_in_a_repeated_table_row_is_refused_as_ambiguous():
    table = "| id | name | status |\n" + "| 17 | widget | active |\n" * 2_000
    result = compute_update(table, "| 17 | widgte | active |\n| 17 | widget |", "x")
    assert not result.ok
    assert "equally well" in result.error


def test_a_document_too_costly_to_normalise_runs_out_of_budget_with_an_error():
    # Every 'Ⅳ' is its own group of the normalised text; hundreds of
    # thousands of them take longer to map than the budget allows.
    result = compute_update("Ⅳ" * 300_000, "VI", "x")
    assert not result.ok and result.new_content is None
    assert result.error


def test_an_old_str_too_long_to_search_approximately_is_refused():
    content = _prose(20_000, seed=4)
    result = compute_update(content, "x" + content[:FUZZY_MAX_OLD_LEN], "y")
    assert not result.ok
    assert "rewrite_artifact" in result.error


def test_a_short_missing_old_str_is_not_found():
    result = compute_update("some text", "xyz", "a")
    assert not result.ok
    assert "was not found" in result.error


# Properties

_ALPHABET = "ab c\n“”—\u00a0中文Ⅳﬁe\u0301"
_texts = st.text(alphabet=_ALPHABET, max_size=60)


@settings(max_examples=200, deadline=None)
@given(content=_texts, data=st.data(), new=st.text(alphabet="xy“", max_size=5))
def test_a_unique_exact_substring_is_replaced_exactly(content, data, new):
    start = data.draw(st.integers(0, len(content)))
    end = data.draw(st.integers(start, len(content)))
    old = content[start:end]
    assume(old and content.find(old) == start and content.find(old, start + 1) == -1)
    result = compute_update(content, old, new)
    assert (result.ok, result.layer, result.span) == (True, "exact", (start, end))
    assert result.new_content == _replaced(content, start, end, new)


@settings(max_examples=300, deadline=None)
@given(content=_texts, old=st.text(alphabet=_ALPHABET + '"-', min_size=0, max_size=20), new=st.text(max_size=5))
def test_only_the_reported_span_ever_changes(content, old, new):
    result = compute_update(content, old, new)
    if result.ok:
        start, end = result.span
        assert 0 <= start <= end <= len(content)
        assert result.new_content == _replaced(content, start, end, new)
        assert result.error == "" and 0.7 <= result.similarity <= 1.0
    else:
        assert result.new_content is None and result.span is None
        assert result.error


def _assert_least_distance_and_no_guess(content: str, old: str) -> None:
    result = compute_update(content, old, "!")
    if result.layer != "fuzzy":
        return
    distances = _distances(old, content)
    best = min(distances[1:])
    best_ends = [end for end, distance in enumerate(distances) if end and distance == best]
    if result.ok:
        start, end = result.span
        assert Levenshtein.distance(old, content[start:end]) == best
        assert result.similarity == 1 - best / len(old) >= 0.7
        assert best_ends[-1] - best_ends[0] <= best
    elif "equally well" in result.error:
        assert result.similarity == 1 - best / len(old)
        assert best_ends[-1] - best_ends[0] > best
    elif "% similar" in result.error:
        assert result.similarity == max(0.0, 1 - best / len(old)) < 0.7


@settings(max_examples=200, deadline=None)
@given(
    content=st.text(alphabet="abc \n", min_size=1, max_size=80), old=st.text(alphabet="abc \n", min_size=4, max_size=16)
)
def test_the_approximate_layer_finds_the_least_distance_and_never_guesses(content, old):
    assume(old not in content)
    _assert_least_distance_and_no_guess(content, old)


@st.composite
def _near_copies(draw):
    """A document and an edited copy of a stretch of it, long enough for the
    search to start from exact seeds."""
    content = draw(st.text(alphabet="abcd \n", min_size=30, max_size=300))
    start = draw(st.integers(0, len(content) - 24))
    old = list(content[start : start + draw(st.integers(24, 60))])
    for _ in range(draw(st.integers(1, 12))):
        at = draw(st.integers(0, len(old) - 1))
        edit = draw(st.sampled_from(["substitute", "insert", "delete"]))
        if edit == "substitute":
            old[at] = draw(st.sampled_from("abcd #"))
        elif edit == "insert":
            old.insert(at, draw(st.sampled_from("abcd #")))
        elif len(old) > 1:
            del old[at]
    return content, "".join(old)


@settings(max_examples=150, deadline=None)
@given(case=_near_copies())
def test_an_edited_copy_is_found_at_the_least_distance(case):
    content, old = case
    assume(old not in content)
    _assert_least_distance_and_no_guess(content, old)
