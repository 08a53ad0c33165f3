import io
import time

import docx
import pypdf
import pytest

from artifactflow import documents
from artifactflow.documents import (
    DocumentError,
    DocumentUnreadableError,
    PdfLockedError,
    docx_markdown,
    pdf_first_pages,
    pdf_text,
)
from tests.factories import docx_of_xml, pdf_bytes, pdf_sharing_one_stream


def test_pdf_text_reads_every_page():
    assert pdf_text(pdf_bytes(["Page one", "Page two"])) == "Page one\n\nPage two"


def test_first_pages_stop_at_the_page_limit_and_keep_the_title():
    pdf = pdf_first_pages(pdf_bytes(["One", "Two", "Three"], title="Tides"), max_pages=2, max_chars=1000)

    assert (pdf.title, pdf.text) == ("Tides", "One\n\nTwo")


def test_first_pages_stop_after_the_page_that_passes_the_character_limit():
    pdf = pdf_first_pages(pdf_bytes(["A long first page", "Second", "Third"]), max_pages=10, max_chars=20)

    assert pdf.text == "A long first page\n\nSecond"


def test_a_broken_pdf_is_unreadable_with_the_parsers_reason():
    with pytest.raises(DocumentUnreadableError, match="Could not read this PDF") as raised:
        pdf_first_pages(b"%PDF-1.4 nothing", max_pages=1, max_chars=100)

    assert raised.value.reason


def test_a_pdf_with_a_password_is_locked():
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf_bytes(["Secret"]))))
    writer.encrypt("hunter2")
    buffer = io.BytesIO()
    writer.write(buffer)

    with pytest.raises(PdfLockedError, match="protected by a password"):
        pdf_text(buffer.getvalue())


# Crafted files: each is refused, or read, within a bound far above what it
# takes here (about a tenth of a second each); before these limits they took
# from 20 seconds to many minutes. The time is this process's CPU time: other
# processes busy on the machine (the suite's other workers) do not count.
BOUND = 10.0
PARAGRAPH = b"<w:p><w:r><w:t>x</w:t></w:r></w:p>"


def _timed(read, *args, **kwargs):
    started = time.process_time()
    try:
        return read(*args, **kwargs), time.process_time() - started
    except DocumentError as error:
        return error, time.process_time() - started


@pytest.mark.parametrize("megabytes", [10, 95])
def test_a_docx_of_megabytes_of_xml_is_refused_before_it_is_parsed(megabytes):
    data = docx_of_xml(PARAGRAPH, repeat=megabytes * 1_000_000 // len(PARAGRAPH))

    refused, seconds = _timed(docx_markdown, data)

    assert len(data) < 400_000
    assert isinstance(refused, DocumentError) and "unpacks to too much data" in str(refused)
    assert "upload them one at a time" in str(refused)
    assert seconds < BOUND


def test_a_docx_of_too_many_paragraphs_is_refused_before_any_is_read():
    # 200,000 empty paragraphs: 1.2 MB of XML, under the size limits.
    refused, seconds = _timed(docx_markdown, docx_of_xml(b"<w:p/>", repeat=200_000))

    assert isinstance(refused, DocumentError)
    assert str(refused).startswith("This Word document has more than 100,000 paragraphs and table cells.")
    assert seconds < BOUND


def test_a_long_docx_is_read_in_time_linear_in_its_length():
    # python-docx looked each paragraph's style up through all the styles: 2.6 ms a paragraph.
    body = b'<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>\xe6\x96\xb9\xe6\xb3\x95</w:t></w:r></w:p>'
    body += PARAGRAPH * 3 + b"<w:p/>" * 4

    markdown, seconds = _timed(docx_markdown, docx_of_xml(body, repeat=5_000))

    assert markdown == "\n\n".join(["## 方法\n\nx\n\nx\n\nx"] * 5_000)
    assert seconds < BOUND


def test_a_table_cell_spanning_a_billion_columns_is_refused():
    table = b'<w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val="1000000000"/></w:tcPr><w:p/></w:tc></w:tr></w:tbl>'

    refused, seconds = _timed(docx_markdown, docx_of_xml(table))

    assert isinstance(refused, DocumentError) and "paragraphs and table cells" in str(refused)
    assert seconds < BOUND


def test_a_column_merged_down_thousands_of_rows_is_read_in_time():
    # python-docx finds each merged cell's text by walking up the column: quadratic.
    first = (
        b'<w:tr><w:tc><w:tcPr><w:vMerge w:val="restart"/></w:tcPr><w:p><w:r><w:t>all</w:t></w:r></w:p></w:tc></w:tr>'
    )
    merged = b"<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc></w:tr>"
    table = b"<w:tbl>" + first + merged * 8_000 + b"</w:tbl>"

    markdown, seconds = _timed(docx_markdown, docx_of_xml(table))

    assert markdown.splitlines()[:4] == ["| all |", "| --- |", "| all |", "| all |"]
    assert len(markdown.splitlines()) == 8_002
    assert seconds < BOUND


def test_merged_table_cells_read_as_python_docx_gives_them():
    document = docx.Document()
    table = document.add_table(rows=3, cols=3)
    table.cell(0, 0).merge(table.cell(0, 1)).text = "wide 宽"
    table.cell(1, 2).merge(table.cell(2, 2)).text = "tall"
    table.cell(1, 0).text = "a|b"
    buffer = io.BytesIO()
    document.save(buffer)
    expected = [[" ".join(cell.text.split()).replace("|", "\\|") for cell in row.cells] for row in table.rows]

    markdown = docx_markdown(buffer.getvalue())

    assert expected == [["wide 宽", "wide 宽", ""], ["a\\|b", "", "tall"], ["", "", "tall"]]
    lines = ["| " + " | ".join(row) + " |" for row in expected]
    assert markdown == "\n".join([lines[0], "| --- | --- | --- |", *lines[1:]])


def test_a_docx_whose_zip_understates_a_size_is_unreadable():
    # zipfile inflates no member past its declared size: the limits can trust them.
    data = bytearray(docx_of_xml(PARAGRAPH, repeat=1_000))
    central = data.rindex(b"word/document.xml")
    size_at = central - 46 + 24  # the central directory entry's uncompressed size
    data[size_at : size_at + 4] = (100).to_bytes(4, "little")

    with pytest.raises(DocumentUnreadableError, match="Could not read this Word document"):
        docx_markdown(bytes(data))


def test_docx_that_unpacks_too_far_is_refused(monkeypatch):
    monkeypatch.setattr(documents, "DOCX_UNZIPPED_MAX_BYTES", 1000)

    with pytest.raises(DocumentError, match="too much data"):
        docx_markdown(docx_of_xml(PARAGRAPH))


def test_pdf_with_too_much_text_is_refused(monkeypatch):
    monkeypatch.setattr(documents, "EXTRACTED_MAX_CHARS", 25)

    with pytest.raises(DocumentError, match="too much text"):
        pdf_text(pdf_bytes(["Hello from page one", "And page two"]))


def test_a_pdf_whose_pages_share_one_large_content_stream_is_refused_before_any_is_parsed():
    # 5 pages drawing one 2.8 MB stream: 6.6 KB that took pypdf 30 seconds.
    data = pdf_sharing_one_stream(pages=5, content=b"0 0 m 1 1 l S\n" * 200_000)

    refused, seconds = _timed(pdf_text, data)

    assert len(data) < 10_000
    assert isinstance(refused, DocumentError)
    assert "pages hold more than 10 MB of text and drawing instructions" in str(refused)
    assert seconds < BOUND


def test_a_pdf_read_for_its_first_pages_is_bounded_the_same_way():
    data = pdf_sharing_one_stream(pages=100, content=b"q Q\n" * 700_000)

    refused, seconds = _timed(pdf_first_pages, data, max_pages=100, max_chars=200_000)

    assert isinstance(refused, DocumentError) and "10 MB" in str(refused)
    assert seconds < BOUND


def test_a_pdf_of_too_many_pages_is_refused(monkeypatch):
    monkeypatch.setattr(documents, "PDF_MAX_PAGES", 2)

    with pytest.raises(DocumentError, match=r"This PDF has 3 pages; up to 2 can be read\. Split it"):
        pdf_text(pdf_bytes(["One", "Two", "Three"]))


def test_a_pdf_stream_that_inflates_past_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(documents, "PDF_STREAM_MAX_BYTES", 1_000_000)

    with pytest.raises(DocumentError, match="This PDF holds a part too large to read"):
        pdf_text(pdf_sharing_one_stream(pages=1, content=b" " * 2_000_000))


# The probe: shapes of Word XML at 1 MB, 10 MB and 95 MB (always refused), each read or refused in time.
RUN = b"<w:r><w:t>x</w:t></w:r>"
DOCX_SHAPES = {
    "paragraphs": b"<w:p>" + RUN + b"</w:p>",
    "empty paragraphs": b"<w:p/>",
    "headings": b'<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr>' + RUN + b"</w:p>",
    "unknown styles": b'<w:p><w:pPr><w:pStyle w:val="No&quot;Such"/></w:pPr>' + RUN + b"</w:p>",
    "list items": b'<w:p><w:pPr><w:numPr><w:ilvl w:val="8"/><w:numId w:val="1"/></w:numPr></w:pPr>' + RUN + b"</w:p>",
    "long paragraphs": b"<w:p>" + RUN * 1000 + b"</w:p>",
    "hyperlinks": b'<w:p><w:hyperlink w:anchor="a">' + RUN + b"</w:hyperlink></w:p>",
    "table rows": b"<w:tbl><w:tr>" + b"<w:tc><w:p/></w:tc>" * 20 + b"</w:tr></w:tbl>",
    "wide spans": b'<w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val="60"/></w:tcPr><w:p>'
    + RUN
    + b"</w:p></w:tc></w:tr></w:tbl>",
    "merged columns": b'<w:tbl><w:tr><w:tc><w:tcPr><w:vMerge w:val="restart"/></w:tcPr><w:p/></w:tc></w:tr>'
    + b"<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc></w:tr>" * 1000
    + b"</w:tbl>",
    "one long text": b"<w:p><w:r><w:t>" + "长".encode() * 300_000 + b"</w:t></w:r></w:p>",
    "nested tables": b"<w:tbl><w:tr><w:tc>" * 300 + b"<w:p/>" + b"</w:tc></w:tr></w:tbl>" * 300,
}


@pytest.mark.parametrize("megabytes", [1, 10, 95])
@pytest.mark.parametrize("shape", DOCX_SHAPES)
def test_every_shape_of_crafted_word_xml_is_read_or_refused_in_time(shape, megabytes):
    unit = DOCX_SHAPES[shape]

    outcome, seconds = _timed(docx_markdown, docx_of_xml(unit, repeat=max(1, megabytes * 1_000_000 // len(unit))))

    assert isinstance(outcome, str | DocumentError)
    assert megabytes < 95 or isinstance(outcome, DocumentError)
    assert seconds < BOUND


PDF_DRAWINGS = {
    "lines": b"0 0 m 1 1 l S\n",
    "text": b"BT /F1 12 Tf 72 720 Td (x) Tj ET\n",
    "saved states": b"q Q\n",
    "kerned text": b"BT /F1 9 Tf [(a)-20(b)30(c)]TJ ET\n",
}


@pytest.mark.parametrize("pages", [4, 100, 2_000])
@pytest.mark.parametrize("drawing", PDF_DRAWINGS)
@pytest.mark.parametrize("read", [pdf_text, lambda data: pdf_first_pages(data, max_pages=100, max_chars=200_000)])
def test_every_pdf_of_pages_sharing_a_large_stream_is_refused_before_parsing(read, drawing, pages):
    data = pdf_sharing_one_stream(
        pages=pages, content=PDF_DRAWINGS[drawing] * (2_800_000 // len(PDF_DRAWINGS[drawing]))
    )

    refused, seconds = _timed(read, data)

    assert isinstance(refused, DocumentError)
    assert seconds < BOUND
