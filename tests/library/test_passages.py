import re

import pytest

from library.passages import PAGE_BREAK, PASSAGE_MAX_SIZE, PASSAGE_SIZE, passages_split, text_size

REPORT = """# Heat pumps

A heat pump moves heat rather than making it.

## Efficiency

Its coefficient of performance is three or more.

### In cold climates

Below −15 °C the COP falls towards two.

## Refrigerants

R-290 is propane.
"""


def _texts(text, **options):
    return [text[passage.start : passage.end] for passage in passages_split(text, **options)]


def _words(text):
    return re.findall(r"\w+", text)


def test_each_section_is_a_passage_under_its_heading_path():
    passages = passages_split(REPORT, markdown=True)

    assert [(REPORT[p.start : p.end], p.heading) for p in passages] == [
        ("A heat pump moves heat rather than making it.", "Heat pumps"),
        ("Its coefficient of performance is three or more.", "Heat pumps › Efficiency"),
        ("Below −15 °C the COP falls towards two.", "Heat pumps › Efficiency › In cold climates"),
        ("R-290 is propane.", "Heat pumps › Refrigerants"),
    ]
    assert {p.page for p in passages} == {None}


def test_text_that_is_not_markdown_keeps_its_hashes_as_words():
    text = "# not a heading in a log\n\nthe next line"

    assert [(p.heading, text[p.start : p.end]) for p in passages_split(text, markdown=False)] == [
        ("", "# not a heading in a log\n\nthe next line")
    ]


def test_paragraphs_are_gathered_up_to_the_size_and_every_word_is_in_a_passage():
    paragraphs = [f"Paragraph {n} says something about batteries and their cells." for n in range(200)]
    text = "\n\n".join(paragraphs)

    texts = _texts(text, markdown=True)

    assert 1 < len(texts) < 200
    assert all(text_size(passage) <= PASSAGE_SIZE for passage in texts)
    # No paragraph is cut: each passage starts and ends with one.
    assert all(passage.startswith("Paragraph") and passage.endswith("cells.") for passage in texts)
    assert [word for passage in texts for word in _words(passage)] == _words(text)


@pytest.mark.parametrize(
    ("sentence", "end"),
    [
        ("Solid-state cells use a ceramic electrolyte instead of a liquid one. ", "."),
        ("固态电池用陶瓷电解质代替易燃的液态电解质。", "。"),
    ],
)
def test_a_long_paragraph_is_cut_after_its_sentences(sentence, end):
    text = sentence * 300

    texts = _texts(text, markdown=False)

    assert len(texts) > 1
    assert all(text_size(passage) <= PASSAGE_SIZE for passage in texts)
    assert all(passage.rstrip().endswith(end) for passage in texts)
    assert "".join(texts).replace(" ", "") == text.replace(" ", "")


@pytest.mark.parametrize("text", ["x" * 100_000, "热" * 100_000, "Ein Satz. " * 50_000])
def test_a_paragraph_with_no_sentence_to_cut_after_is_cut_at_the_size(text):
    texts = _texts(text, markdown=False)

    assert all(text_size(passage) <= PASSAGE_MAX_SIZE for passage in texts)
    assert "".join(texts).replace(" ", "") == text.replace(" ", "")


def test_a_code_block_with_blank_lines_stays_in_one_passage():
    code = "```python\ndef f():\n\n    return 1\n```"
    text = f"# Code\n\nBefore.\n\n{code}\n\nAfter."

    texts = _texts(text, markdown=True)

    assert texts == [f"Before.\n\n{code}\n\nAfter."]


def test_a_pdfs_passages_know_their_page_and_never_span_two():
    pages = ["Page one is about zeolites.", "Page two: sorbents.\n\nMore on page two.", "", "Page four."]
    text = PAGE_BREAK.join(pages)

    passages = passages_split(text, markdown=False)

    assert [(text[p.start : p.end], p.page) for p in passages] == [
        ("Page one is about zeolites.", 1),
        ("Page two: sorbents.\n\nMore on page two.", 2),
        ("Page four.", 4),
    ]


def test_an_empty_or_blank_text_has_no_passages():
    assert passages_split("", markdown=True) == []
    assert passages_split(" \n\n\t\n", markdown=True) == []
    assert passages_split("# Only a heading", markdown=True) == []
