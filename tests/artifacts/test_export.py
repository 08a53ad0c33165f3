import io
from textwrap import dedent

import docx
import pytest
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml.ns import qn
from lxml import etree

from artifactflow import markdown
from artifacts.export import MONOSPACE_FONT, docx_from_markdown

MARKDOWN = dedent(
    """\
    # Findings

    A paragraph with **bold words**, *an aside*, `pip install x`, ~~old~~ and
    [the source](https://example.com/paper) and <https://example.com/raw>.

    ## Lists

    - fruit
      - apple
        - green
    - vegetables

    1. first
       1. first sub
    2. second

    - [ ] write the summary
    - [x] collect sources

    ### Code

    ```python
    def answer():
        return 42
    ```

    | Model | Score | Notes |
    |-------|------:|-------|
    | a     | 0.91  | **best** |
    | b     | 0.85  | cheap |

    > Quoted *wisdom*.

    ---

    <script>alert("hi")</script>

    After the script.
    """
)


@pytest.fixture(scope="module")
def document():
    return docx.Document(io.BytesIO(docx_from_markdown(markdown=MARKDOWN, title="Research report")))


def _paragraph(document, text):
    return next(paragraph for paragraph in document.paragraphs if paragraph.text == text)


def _run(paragraph, text):
    return next(run for run in paragraph.runs if run.text == text)


def test_title_and_headings_use_word_styles(document):
    styles = [(p.style.name, p.text) for p in document.paragraphs if p.style.name.startswith(("Title", "Heading"))]

    assert styles == [
        ("Title", "Research report"),
        ("Heading 1", "Findings"),
        ("Heading 2", "Lists"),
        ("Heading 3", "Code"),
    ]


def test_inline_formatting_becomes_run_formatting(document):
    paragraph = next(p for p in document.paragraphs if p.text.startswith("A paragraph"))

    assert _run(paragraph, "bold words").bold
    assert _run(paragraph, "an aside").italic
    assert _run(paragraph, "old").font.strike
    assert _run(paragraph, "pip install x").font.name == MONOSPACE_FONT
    assert not _run(paragraph, "A paragraph with ").bold


def test_links_show_their_text_then_their_address(document):
    paragraph = next(p for p in document.paragraphs if p.text.startswith("A paragraph"))

    assert "the source (https://example.com/paper)" in paragraph.text
    # An autolink's text is its address already.
    assert paragraph.text.endswith(" https://example.com/raw.")


def test_list_styles_follow_nesting(document):
    assert _paragraph(document, "fruit").style.name == "List Bullet"
    assert _paragraph(document, "apple").style.name == "List Bullet 2"
    assert _paragraph(document, "green").style.name == "List Bullet 3"
    assert _paragraph(document, "vegetables").style.name == "List Bullet"
    assert _paragraph(document, "first").style.name == "List Number"
    assert _paragraph(document, "first sub").style.name == "List Number 2"
    assert _paragraph(document, "second").style.name == "List Number"


def test_task_list_items_get_boxes(document):
    assert _paragraph(document, "☐ write the summary").style.name == "List Bullet"
    assert _paragraph(document, "☑ collect sources").style.name == "List Bullet"


def test_code_block_keeps_its_lines_in_monospace(document):
    paragraph = next(p for p in document.paragraphs if p.text.startswith("def answer"))

    assert paragraph.text == "def answer():\n    return 42"
    assert {run.font.name for run in paragraph.runs} == {MONOSPACE_FONT}


def test_table_keeps_rows_columns_and_header(document):
    (table,) = document.tables
    cells = [[cell.text for cell in row.cells] for row in table.rows]

    assert table.style.name == "Table Grid"
    assert cells == [["Model", "Score", "Notes"], ["a", "0.91", "best"], ["b", "0.85", "cheap"]]
    assert all(run.bold for cell in table.rows[0].cells for run in cell.paragraphs[0].runs)
    assert table.rows[1].cells[2].paragraphs[0].runs[0].bold


def test_blockquote_uses_the_quote_style(document):
    assert _paragraph(document, "Quoted wisdom.").style.name == "Quote"


def test_horizontal_rule_is_a_bordered_empty_paragraph(document):
    borders = [p for p in document.paragraphs if p._p.pPr is not None and p._p.pPr.find(qn("w:pBdr")) is not None]

    assert [p.text for p in borders] == [""]


def test_raw_html_stays_literal_text(document):
    # Word never runs it; the reader sees what the author wrote.
    paragraph = _paragraph(document, '<script>alert("hi")</script>')

    assert paragraph.style.name == "Normal"
    assert _paragraph(document, "After the script.")


def test_separate_numbered_lists_each_start_again():
    markdown = "1. a\n2. b\n\ntext\n\n1. c\n\nmore\n\n7. d"

    document = docx.Document(io.BytesIO(docx_from_markdown(markdown=markdown)))
    num_ids = [p._p.pPr.numPr.numId.val for p in document.paragraphs if p.style.name == "List Number"]
    numbering = document.part.numbering_part.element

    assert num_ids[0] == num_ids[1]
    assert len(set(num_ids)) == 3
    starts = [numbering.num_having_numId(num_id).lvlOverride_lst[0].startOverride.val for num_id in num_ids]
    assert starts == [1, 1, 1, 7]


def test_control_characters_and_unknown_input_do_not_break_the_export():
    markdown = "bell\x07 and escape \x1b[0m\n\n- \n\n[^1]: note\n\n* * *\n\n|a|\n|-|\n"

    document = docx.Document(io.BytesIO(docx_from_markdown(markdown=markdown, title="\x00")))

    assert document.paragraphs[0].text == "bell and escape [0m"


def test_big_document_exports(monkeypatch):
    # Its structure is what is checked: a machine busy enough to pass the
    # render deadline would export it as plain paragraphs (test_markdown covers that).
    monkeypatch.setattr(markdown, "RENDER_SECONDS", 60.0)
    blocks = []
    for number in range(5000):
        blocks.append(f"Paragraph **{number}** with `code` and [a link](https://example.com/{number}).")
        if number % 100 == 0:
            blocks.append(f"- item {number}\n  1. sub\n\n| a | b |\n|---|---|\n| {number} | x |")

    document = docx.Document(io.BytesIO(docx_from_markdown(markdown="\n\n".join(blocks))))

    assert document.paragraphs[-1].text == "Paragraph 4999 with code and a link (https://example.com/4999)."
    assert len(document.tables) == 50


CITED = """# 热泵报告

Homes stayed “at 20 °C down to -15 °C” [1]. 价格为“每千瓦一千二百元”。[2] Both [1, 2]; none [3].

| 地区 | 价格 |
|---|---|
| 北方 | 一千二百元 [2] |

## Sources
[1] [Heat pump survey](https://survey.example/2026)
[2] [热泵手册](library://9#3)
"""


def test_citations_become_footnotes_and_the_sources_stay_a_list():
    exported = docx.Document(io.BytesIO(docx_from_markdown(markdown=CITED)))

    notes = exported.part.part_related_by(RELATIONSHIP_TYPE.FOOTNOTES)
    footnotes = {
        int(note.get(qn("w:id"))): "".join(note.itertext()).strip()
        for note in etree.fromstring(notes.blob).iter(qn("w:footnote"))
        if note.get(qn("w:type")) is None
    }
    references = [int(ref.get(qn("w:id"))) for ref in exported.element.body.iter(qn("w:footnoteReference"))]
    assert footnotes == {
        1: "“at 20 °C down to -15 °C” — Heat pump survey, https://survey.example/2026",
        2: "“每千瓦一千二百元” — 热泵手册, library://9#3",
        3: "Heat pump survey, https://survey.example/2026",
        4: "热泵手册, library://9#3",
        5: "热泵手册, library://9#3",
    }
    # In the text's order, the table's too; the marker with no source stays as written.
    assert references == [1, 2, 3, 4, 5]
    assert (
        exported.paragraphs[1].text
        == "Homes stayed “at 20 °C down to -15 °C” . 价格为“每千瓦一千二百元”。 Both ; none [3]."
    )
    assert exported.paragraphs[-1].text == (
        "[1] Heat pump survey (https://survey.example/2026)\n[2] 热泵手册 (library://9#3)"
    )


def test_a_report_without_citations_has_no_footnotes():
    exported = docx.Document(io.BytesIO(docx_from_markdown(markdown="A claim [1].\n\n[1] nothing to cite")))

    assert RELATIONSHIP_TYPE.FOOTNOTES not in {rel.reltype for rel in exported.part.rels.values()}
