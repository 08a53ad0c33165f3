"""Text read out of PDFs and Word documents, for uploads, the team library and web_fetch.

Pure functions on the file's bytes. Every limit that keeps a crafted file
from filling memory or taking minutes is here, and so is every way a file can
fail to read. They bound what the parsers are asked to do; the child process
of artifactflow.extraction bounds whatever they do anyway.
"""

import io
import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import docx
import pypdf
from docx.enum.style import WD_STYLE_TYPE
from docx.oxml.ns import qn
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph
from lxml import etree
from pypdf.errors import LimitReachedError

# Text pulled out of a Word file or PDF; far more than any real document,
# small enough that a crafted file cannot fill memory or the database.
EXTRACTED_MAX_CHARS = 5_000_000

# A .docx is a zip; python-docx inflates every part it uses, images included,
# so a tiny upload could otherwise expand to gigabytes.
DOCX_UNZIPPED_MAX_BYTES = 64_000_000
DOCX_MAX_PARTS = 2_000
# Its XML is parsed whole into a tree: memory and time follow its size and its
# tags (opening and closing). Word writes some 45 bytes a tag, so 24 MB is some
# 500,000 tags, thousands of pages, read in 3 s with 300 MB; 10 MB of crafted
# XML, packed into 30 KB, can be two million empty paragraphs.
DOCX_XML_MAX_BYTES = 24_000_000
DOCX_XML_MAX_TAGS = 1_000_000
# Paragraphs and table cells; a cell spanning columns counts once per column.
# python-docx reads some 20,000 paragraphs a second.
DOCX_MAX_BLOCKS = 100_000

# Pages read from an uploaded PDF.
PDF_MAX_PAGES = 2_000
# Decompressed bytes of any one stream, and of the content streams of all the
# pages read: a stream that several pages share is parsed, and counted, once
# per page. pypdf parses content at 0.3 to 0.5 MB a second, so this bounds the
# time too; a page of dense text holds about 10 KB.
PDF_STREAM_MAX_BYTES = 16_000_000
PDF_CONTENT_MAX_BYTES = 10_000_000

# Extracted text keeps tabs and line breaks; the rest cannot be stored or shown.
# Between a PDF's pages in its text, where they are marked (pdf_text).
PAGE_BREAK = "\f"
_EXTRACTED_JUNK = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HEADING_STYLE = re.compile(r"Heading (\d)")
_LIST_STYLE = re.compile(r"List (Bullet|Number|Paragraph)(?: (\d))?")
_XML_PART = re.compile(r".*\.(xml|rels)", re.IGNORECASE)


class DocumentError(Exception):
    """A document we cannot read; the message is for the person who gave it."""


class PdfLockedError(DocumentError):
    """A PDF that needs a password to open."""


class DocumentUnreadableError(DocumentError):
    """A file its parser failed on; `reason` is the parser's own word for why."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class PdfFirstPages:
    title: str
    text: str


def pdf_text(data: bytes, *, pages_marked: bool = False) -> str:
    """All the text of a PDF, page after page; with `pages_marked`, each page
    after the first starting at a PAGE_BREAK, empty pages too, so that the
    text tells which page each part is on (the library's passages)."""
    with _pdf_limits():
        reader = _pdf_reader(data)
        if len(reader.pages) > PDF_MAX_PAGES:
            raise DocumentError(
                f"This PDF has {len(reader.pages):,} pages; up to {PDF_MAX_PAGES:,} can be read. "
                "Split it and upload the parts."
            )
        pages = []
        extracted = 0
        for text in _pdf_pages(reader):
            extracted += len(text)
            if extracted > EXTRACTED_MAX_CHARS:
                raise DocumentError("This PDF holds too much text to read.")
            pages.append(text)
    if pages_marked:
        return f"\n{PAGE_BREAK}\n".join(_text_cleaned(page) for page in pages)
    return _text_cleaned("\n\n".join(page for page in pages if page))


def pdf_first_pages(data: bytes, *, max_pages: int, max_chars: int) -> PdfFirstPages:
    """A PDF's title and the text of its first pages: reading stops after
    `max_pages`, or at the page where the text passes `max_chars` (that page
    kept whole, for the caller to cut)."""
    with _pdf_limits():
        reader = _pdf_reader(data)
        title = (reader.metadata.title if reader.metadata else None) or ""
        pages, size = [], 0
        for text in _pdf_pages(reader, max_pages=max_pages):
            pages.append(text)
            size += len(text)
            if size > max_chars:
                break
    return PdfFirstPages(title=str(title), text="\n\n".join(page for page in pages if page))


def docx_markdown(data: bytes) -> str:
    """The Word document's text as markdown: headings, lists and tables kept."""
    try:
        _docx_size_check(data)
        document = docx.Document(io.BytesIO(data))
        blocks = _Budget(DOCX_MAX_BLOCKS)
        # Counted before any is read: python-docx reads some 20,000 paragraphs a second.
        blocks.spend(sum(1 for _ in document.element.body.iter(qn("w:p"), qn("w:tc"))))
        style_name = _docx_style_names(document)
        parts = []
        after_list_item = False
        for block in document.iter_inner_content():
            markdown, list_item = _docx_block_markdown(block, style_name=style_name, blocks=blocks)
            if markdown:
                # Items of one list stay on consecutive lines, so the list stays tight.
                separator = "\n" if list_item and after_list_item else "\n\n"
                parts.append(separator + markdown if parts else markdown)
                after_list_item = list_item
    # Out of memory is the caller's to report (artifactflow.extraction's child).
    except (DocumentError, MemoryError):
        raise
    # python-docx and zipfile fail on malformed files with whatever their parser
    # met (BadZipFile, KeyError, ValueError, lxml errors…); all of them mean the
    # same to the user.
    except Exception as error:
        # libxml2 out of memory is a parse error to lxml.
        if any(entry.type == etree.ErrorTypes.ERR_NO_MEMORY for entry in getattr(error, "error_log", ())):
            raise MemoryError from None
        raise DocumentUnreadableError(f"Could not read this Word document: {error}", reason=str(error)) from None
    return _text_cleaned("".join(parts))


class _Budget:
    """How many more paragraphs and cells a document may have read."""

    def __init__(self, limit: int):
        self.left = limit

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise DocumentError(
                f"This Word document has more than {DOCX_MAX_BLOCKS:,} paragraphs and table cells. "
                "Split it into smaller documents and upload them one at a time."
            )


def _docx_size_check(data: bytes) -> None:
    """Refuse a document whose parts would take too much to unpack or parse,
    from the sizes the zip declares. zipfile never inflates a member past
    its declared size (it stops there, and the checksum then fails)."""
    too_big = (
        "This Word document unpacks to too much data to read. "
        "Split it into smaller documents and upload them one at a time."
    )
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        if len(members) > DOCX_MAX_PARTS:
            raise DocumentError(f"This Word document has more than {DOCX_MAX_PARTS:,} parts; it cannot be read.")
        if sum(member.file_size for member in members) > DOCX_UNZIPPED_MAX_BYTES:
            raise DocumentError(too_big)
        xml = [member for member in members if _XML_PART.fullmatch(member.filename)]
        if sum(member.file_size for member in xml) > DOCX_XML_MAX_BYTES:
            raise DocumentError(too_big)
        # Counted before python-docx parses them.
        if sum(archive.read(member).count(b"<") for member in xml) > DOCX_XML_MAX_TAGS:
            raise DocumentError(too_big)


def _docx_style_names(document) -> Callable[[Paragraph], str]:
    """A paragraph's style name, as python-docx's `paragraph.style.name` gives
    it, from a table made once: python-docx looks each one up through all of
    the document's styles, which made a document of 100,000 empty paragraphs
    take minutes."""
    names: dict[str, str] = {}
    for style in document.styles:
        # The first style of an id wins, as in python-docx's lookup.
        if style.type == WD_STYLE_TYPE.PARAGRAPH and style.style_id not in names:
            names[style.style_id] = style.name or ""
    default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    default_name = (default.name or "") if default is not None else ""

    def style_name(paragraph: Paragraph) -> str:
        return names.get(paragraph._p.style or "", default_name)

    return style_name


def _pdf_reader(data: bytes) -> pypdf.PdfReader:
    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise PdfLockedError("This PDF is protected by a password.")
    return reader


def _pdf_pages(reader: pypdf.PdfReader, *, max_pages: int | None = None) -> Iterator[str]:
    """Each page's text, read only when the caller asks for it, once their
    content was measured: decompressing is quick (and done once for a shared
    stream), parsing is not."""
    pages = reader.pages[:max_pages]
    content = 0
    for page in pages:
        contents = page.get_contents()
        content += len(contents.get_data()) if contents is not None else 0
        if content > PDF_CONTENT_MAX_BYTES:
            raise DocumentError(
                f"This PDF's pages hold more than {PDF_CONTENT_MAX_BYTES // 1_000_000} MB of text and drawing "
                "instructions, too much to read. Split it and upload the parts."
            )
    for page in pages:
        yield page.extract_text().strip()


@contextmanager
def _pdf_limits():
    """pypdf's decompression limits lowered to ours, and its errors made ours."""
    limits = dict.fromkeys(
        (
            "maximum_declared_stream_length",
            "array_based_stream_maximum_output_length",
            "zlib_maximum_output_length",
            "lzw_maximum_output_length",
            "run_length_maximum_output_length",
        ),
        PDF_STREAM_MAX_BYTES,
    )
    try:
        with pypdf.apply_configuration(**limits):
            yield
    except (DocumentError, MemoryError):
        raise
    except LimitReachedError as error:
        raise DocumentError(
            f"This PDF holds a part too large to read ({error}). Split it and upload the parts."
        ) from None
    # pypdf meets broken files with many kinds of error; all mean the same to the user.
    except Exception as error:
        raise DocumentUnreadableError(f"Could not read this PDF: {error}", reason=str(error)) from None


def _docx_block_markdown(
    block: Paragraph | Table, *, style_name: Callable[[Paragraph], str], blocks: _Budget
) -> tuple[str, bool]:
    """One paragraph or table as markdown, and whether it is a list item."""
    if isinstance(block, Table):
        return _docx_table_markdown(block, blocks=blocks), False
    text = block.text.strip()
    if not text:
        return "", False
    style = style_name(block)
    if style == "Title":
        return f"# {text}", False
    if heading := _HEADING_STYLE.fullmatch(style):
        return f"{'#' * min(int(heading[1]), 6)} {text}", False
    # Lists made in Word number 'List Paragraph's directly, nesting by level;
    # python-docx's and older ones use 'List Bullet 2' and the like.
    numbering = block._p.pPr.numPr if block._p.pPr is not None else None
    listed = _LIST_STYLE.fullmatch(style)
    if numbering is None and listed is None:
        return text, False
    if numbering is not None and numbering.ilvl is not None:
        level = numbering.ilvl.val
    else:
        level = int(listed[2] or 1) - 1 if listed else 0
    marker = "1." if listed and listed[1] == "Number" else "-"
    # Four spaces nest under both "- " and "1. " items.
    return f"{'    ' * level}{marker} {text}", True


def _docx_table_markdown(table: Table, *, blocks: _Budget) -> str:
    """A markdown table whose first row is the header, as Word tables usually have."""
    above: dict[int, tuple[str, int]] = {}
    rows = [_docx_row_texts(tr, table=table, blocks=blocks, above=above) for tr in table._tbl.tr_lst]
    columns = max((len(row) for row in rows), default=0)
    if not columns:
        return ""
    lines = ["| " + " | ".join(row + [""] * (columns - len(row))) + " |" for row in rows]
    lines.insert(1, "|" + " --- |" * columns)
    return "\n".join(lines)


def _docx_row_texts(tr, *, table: Table, blocks: _Budget, above: dict[int, tuple[str, int]]) -> list[str]:
    """A row's cells as python-docx's `row.cells` gives them (a cell spanning
    columns once per column, a vertically merged one as the cell it continues),
    without its lookups: those walk up the column for each merged cell, and
    repeat a cell as many times as its span says, however many that is.
    `above` holds the text and span at each column of the rows before."""
    texts = []
    offset = tr.grid_before
    for tc in tr.tc_lst:
        if tc.vMerge == "continue":
            text, span = above.get(offset, ("", 1))
        else:
            text, span = _table_cell_markdown(_Cell(tc, table).text), tc.grid_span
            above[offset] = (text, span)
        # The cell itself was counted with the others; its further columns count here.
        blocks.spend(span - 1)
        texts.extend([text] * span)
        offset += tc.grid_span
    return texts


def _table_cell_markdown(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _text_cleaned(text: str) -> str:
    text = _EXTRACTED_JUNK.sub("", text)
    if len(text) > EXTRACTED_MAX_CHARS:
        raise DocumentError("This document holds too much text to read.")
    return text
