"""Text read out of PDFs and Word documents, for uploads, the team library and web_fetch.

Pure functions on the file's bytes. Every limit that keeps a crafted file
from filling memory is here, and so is every way a file can fail to read.
"""

import io
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import docx
import pypdf
from docx.table import Table
from docx.text.paragraph import Paragraph

# Text pulled out of a Word file or PDF; far more than any real document,
# small enough that a crafted file cannot fill memory or the database.
EXTRACTED_MAX_CHARS = 5_000_000
# A .docx is a zip; python-docx inflates every part, so a tiny upload could
# otherwise expand to gigabytes.
DOCX_UNZIPPED_MAX_BYTES = 100_000_000

# Extracted text keeps tabs and line breaks; the rest cannot be stored or shown.
_EXTRACTED_JUNK = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HEADING_STYLE = re.compile(r"Heading (\d)")
_LIST_STYLE = re.compile(r"List (Bullet|Number|Paragraph)(?: (\d))?")


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


def pdf_text(data: bytes) -> str:
    """All the text of a PDF, page after page."""
    pages = []
    extracted = 0
    for text in _pdf_pages(_pdf_reader(data)):
        extracted += len(text)
        if extracted > EXTRACTED_MAX_CHARS:
            raise DocumentError("This PDF holds too much text to read.")
        pages.append(text)
    return _text_cleaned("\n\n".join(page for page in pages if page))


def pdf_first_pages(data: bytes, *, max_pages: int, max_chars: int) -> PdfFirstPages:
    """A PDF's title and the text of its first pages: reading stops after
    `max_pages`, or at the page where the text passes `max_chars` (that page
    kept whole, for the caller to cut)."""
    reader = _pdf_reader(data)
    with _pdf_read_errors():
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
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unzipped = sum(member.file_size for member in archive.infolist())
    except zipfile.BadZipFile as error:
        raise DocumentUnreadableError(f"Could not read this Word document: {error}", reason=str(error)) from None
    if unzipped > DOCX_UNZIPPED_MAX_BYTES:
        raise DocumentError("This Word document unpacks to too much data to read.")
    try:
        document = docx.Document(io.BytesIO(data))
        parts = []
        after_list_item = False
        for block in document.iter_inner_content():
            markdown, list_item = _docx_block_markdown(block)
            if markdown:
                # Items of one list stay on consecutive lines, so the list stays tight.
                separator = "\n" if list_item and after_list_item else "\n\n"
                parts.append(separator + markdown if parts else markdown)
                after_list_item = list_item
    # python-docx fails on malformed files with whatever its parser met
    # (KeyError, ValueError, lxml errors…); all of them mean the same to the user.
    except Exception as error:
        raise DocumentUnreadableError(f"Could not read this Word document: {error}", reason=str(error)) from None
    return _text_cleaned("".join(parts))


def _pdf_reader(data: bytes) -> pypdf.PdfReader:
    with _pdf_read_errors():
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise PdfLockedError("This PDF is protected by a password.")
    return reader


def _pdf_pages(reader: pypdf.PdfReader, *, max_pages: int | None = None) -> Iterator[str]:
    """Each page's text, read only when the caller asks for it."""
    with _pdf_read_errors():
        for page in reader.pages[:max_pages]:
            yield page.extract_text().strip()


@contextmanager
def _pdf_read_errors():
    try:
        yield
    except DocumentError:
        raise
    # pypdf meets broken files with many kinds of error; all mean the same to the user.
    except Exception as error:
        raise DocumentUnreadableError(f"Could not read this PDF: {error}", reason=str(error)) from None


def _docx_block_markdown(block: Paragraph | Table) -> tuple[str, bool]:
    """One paragraph or table as markdown, and whether it is a list item."""
    if isinstance(block, Table):
        return _docx_table_markdown(block), False
    text = block.text.strip()
    style = block.style.name if block.style is not None else ""
    if not text:
        return "", False
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


def _docx_table_markdown(table: Table) -> str:
    """A markdown table whose first row is the header, as Word tables usually have."""
    rows = [[_table_cell_markdown(cell.text) for cell in row.cells] for row in table.rows]
    columns = max((len(row) for row in rows), default=0)
    if not columns:
        return ""
    lines = ["| " + " | ".join(row + [""] * (columns - len(row))) + " |" for row in rows]
    lines.insert(1, "|" + " --- |" * columns)
    return "\n".join(lines)


def _table_cell_markdown(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _text_cleaned(text: str) -> str:
    text = _EXTRACTED_JUNK.sub("", text)
    if len(text) > EXTRACTED_MAX_CHARS:
        raise DocumentError("This document holds too much text to read.")
    return text
