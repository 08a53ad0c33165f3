import io
import time
import zipfile

import docx
import pytest

from artifacts import uploads
from artifacts.uploads import ConvertedUpload, UploadError, artifact_id_from_filename, convert_upload
from tests.factories import docx_of_xml, pdf_bytes, pdf_sharing_one_stream

PARAGRAPH = b"<w:p><w:r><w:t>x</w:t></w:r></w:p>"


@pytest.mark.parametrize(
    ("filename", "artifact_id"),
    [
        ("report.md", "report.md"),
        ("../../etc/passwd", "passwd"),
        ("..\\..\\win.ini", "win.ini"),
        ("C:\\Users\\me\\notes.md", "notes.md"),
        ("a\x00b.md", "ab.md"),
        ("tab\there\n.txt", "tab_here.txt"),
        (".htaccess", "htaccess"),
        ("..", "upload"),
        ("   ", "upload"),
        ("", "upload"),
        ("重要 报告.md", "重要_报告.md"),
        ("e\u0301te\u0301.txt", "été.txt"),  # decomposed accents, as macOS sends them
        ("my  report (final)!.md", "my_report_final.md"),
        ("<script>.html", "script.html"),
        ("photo\u202egnp.exe", "photognp.exe"),
    ],
)
def test_artifact_id_from_filename_is_safe(filename, artifact_id):
    assert artifact_id_from_filename(filename, taken=set()) == artifact_id


def test_artifact_id_from_a_long_filename_keeps_the_extension():
    artifact_id = artifact_id_from_filename("x" * 500 + ".md", taken=set())

    assert artifact_id == "x" * 97 + ".md"


def test_artifact_id_takes_the_next_free_number():
    taken = {"report.md", "report_1.md"}

    assert artifact_id_from_filename("report.md", taken=taken) == "report_2.md"
    assert artifact_id_from_filename("notes", taken={"notes"}) == "notes_1"


def test_numbered_artifact_id_stays_within_the_limit():
    long_name = "y" * 200 + ".csv"
    first = artifact_id_from_filename(long_name, taken=set())

    second = artifact_id_from_filename(long_name, taken={first})

    assert second == "y" * 94 + "_1.csv"
    assert len(second) == uploads.ID_MAX_LENGTH


@pytest.mark.parametrize(
    ("filename", "data", "content", "content_type"),
    [
        ("notes.md", "# Notes\n\nCafé ☕\n".encode(), "# Notes\n\nCafé ☕\n", "text/markdown"),
        ("notes.MARKDOWN", b"# Hi", "# Hi", "text/markdown"),
        ("bom.txt", b"\xef\xbb\xbfwith a BOM", "with a BOM", "text/plain"),
        ("windows.txt", b"one\r\ntwo\r\n", "one\ntwo\n", "text/plain"),
        ("wide.txt", "hi ✓".encode("utf-16"), "hi ✓", "text/plain"),
        ("data.json", b'{"a": [1, 2]}', '{"a": [1, 2]}', "application/json"),
        ("table.csv", b"a,b\n1,2\n", "a,b\n1,2\n", "text/csv"),
        ("script.py", b"print('hi')\n", "print('hi')\n", "text/x-python"),
        ("config.yml", b"a: 1\n", "a: 1\n", "text/x-yaml"),
        ("empty.txt", b"", "", "text/plain"),
    ],
)
def test_text_uploads_become_text_artifacts(filename, data, content, content_type):
    converted = convert_upload(filename=filename, data=data, content_type="application/octet-stream")

    assert converted == ConvertedUpload(
        kind="text", content=content, content_type=content_type, title=filename, size=len(data)
    )


@pytest.mark.parametrize(
    ("filename", "title"),
    [
        ("C:\\tmp\\重要 报告\x07\u202e.md", "重要 报告.md"),
        # Every bidirectional control, and the other characters that show nothing.
        ("photo\u200fgnp\u200e.exe", "photognp.exe"),
        ("\u061c\u2067报告\u2069\u200b\ufeff\u00ad\u2060.md", "报告.md"),
        ("\u202a\u202b\u202c\u202d\u2066\u2068notes.md", "notes.md"),
        ("tag\U000e0041\U000e007f.md", "tag.md"),
        # A joiner between two characters is part of the name (one emoji, Persian spelling).
        ("👩\u200d🔬 می\u200cخواهم.md", "👩\u200d🔬 می\u200cخواهم.md"),
    ],
)
def test_title_is_the_cleaned_base_name(filename, title):
    converted = convert_upload(filename=filename, data=b"x")

    assert converted.title == title


def test_non_utf8_text_is_refused():
    with pytest.raises(UploadError, match="not UTF-8"):
        convert_upload(filename="latin.txt", data="café".encode("latin-1"))


def test_binary_data_under_a_text_name_is_refused():
    with pytest.raises(UploadError, match="binary"):
        convert_upload(filename="image.txt", data=b"abc\x00\x01\x02")


def test_docx_becomes_markdown():
    document = docx.Document()
    document.add_heading("Study", level=0)
    document.add_heading("Method", level=2)
    document.add_paragraph("We asked | people.")
    document.add_paragraph("first point", style="List Bullet")
    document.add_paragraph("detail", style="List Bullet 2")
    document.add_paragraph("step one", style="List Number")
    table = document.add_table(rows=2, cols=2)
    for row, texts in zip(table.rows, [["Group", "Size"], ["control", "12\nadults"]], strict=True):
        for cell, text in zip(row.cells, texts, strict=True):
            cell.text = text
    document.add_paragraph("")

    converted = convert_upload(filename="study.docx", data=_docx_bytes(document))

    assert converted.kind == "text"
    assert converted.content_type == "text/markdown"
    assert converted.content == (
        "# Study\n\n"
        "## Method\n\n"
        "We asked | people.\n\n"
        "- first point\n"
        "    - detail\n"
        "1. step one\n\n"
        "| Group | Size |\n"
        "| --- | --- |\n"
        "| control | 12 adults |"
    )


def test_docx_lists_numbered_by_word_nest_by_their_level():
    document = docx.Document()
    for text, level in [("top", 0), ("inner", 1)]:
        paragraph = document.add_paragraph(text, style="List Paragraph")
        numbering = paragraph._p.get_or_add_pPr().get_or_add_numPr()
        numbering.get_or_add_numId().val = 1
        numbering.get_or_add_ilvl().val = level

    converted = convert_upload(filename="lists.docx", data=_docx_bytes(document))

    assert converted.content == "- top\n    - inner"


def test_pdf_becomes_text():
    data = pdf_bytes(["Hello from page one", "And page two"])

    converted = convert_upload(filename="paper.pdf", data=data)

    assert converted.kind == "text"
    assert converted.content_type == "text/plain"
    assert converted.content == "Hello from page one\n\nAnd page two"
    assert converted.size == len(data)


@pytest.mark.parametrize(
    ("filename", "data", "message"),
    [
        ("broken.pdf", b"%PDF-1.4\nnot really a pdf", "Could not read this PDF"),
        ("broken.pdf", b"", "Could not read this PDF"),
        ("broken.docx", b"PK\x03\x04 not a zip", "Could not read this Word document"),
        ("broken.docx", b"", "Could not read this Word document"),
    ],
)
def test_corrupt_documents_are_refused(filename, data, message):
    with pytest.raises(UploadError, match=message):
        convert_upload(filename=filename, data=data)


def test_zip_that_is_not_a_word_document_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "hi")

    with pytest.raises(UploadError, match="Could not read this Word document"):
        convert_upload(filename="fake.docx", data=buffer.getvalue())


@pytest.mark.parametrize(
    ("filename", "made", "message"),
    [
        # 10 MB and 95 MB of XML in 60 KB and 300 KB: 44 s and more than 4.5 minutes (and 2 GB) before.
        ("ten.docx", lambda: docx_of_xml(PARAGRAPH, repeat=10_000_000 // len(PARAGRAPH)), "unpacks to too much data"),
        ("95.docx", lambda: docx_of_xml(PARAGRAPH, repeat=95_000_000 // len(PARAGRAPH)), "unpacks to too much data"),
        # Five pages drawing one 2.8 MB stream, 6.6 KB: 30 s before.
        (
            "shared.pdf",
            lambda: pdf_sharing_one_stream(pages=5, content=b"0 0 m 1 1 l S\n" * 200_000),
            "pages hold more than 10 MB",
        ),
    ],
)
def test_crafted_documents_are_refused_in_time_with_a_clear_message(filename, made, message):
    data = made()
    started = time.perf_counter()

    with pytest.raises(UploadError, match=message) as refused:
        convert_upload(filename=filename, data=data)

    assert "Split it" in str(refused.value)
    assert time.perf_counter() - started < 15  # about half a second here, the child's start included


def test_docx_in_chinese_becomes_markdown():
    document = docx.Document()
    document.add_heading("研究报告", level=1)
    document.add_paragraph("效率如何？", style="List Bullet")

    converted = convert_upload(filename="报告.docx", data=_docx_bytes(document))

    assert (converted.title, converted.content) == ("报告.docx", "# 研究报告\n\n- 效率如何？")


def test_png_stays_a_file():
    data = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32

    converted = convert_upload(filename="chart.png", data=data, content_type="image/png")

    assert converted == ConvertedUpload(kind="file", content="", content_type="image/png", title="chart.png", size=40)


@pytest.mark.parametrize(
    ("filename", "declared", "content_type"),
    [
        ("archive.zip", "", "application/zip"),
        ("mystery.qqq", "application/x-mystery", "application/x-mystery"),
        ("mystery.qqq", "not a type", "application/octet-stream"),
        ("mystery", "", "application/octet-stream"),
    ],
)
def test_other_files_are_typed_by_extension_then_by_the_browser(filename, declared, content_type):
    converted = convert_upload(filename=filename, data=b"\x00\x01", content_type=declared)

    assert (converted.kind, converted.content, converted.content_type) == ("file", "", content_type)


def _docx_bytes(document) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()
