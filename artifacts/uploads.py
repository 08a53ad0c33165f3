"""Files users upload, made into artifacts: a safe id, and text where we can read it.

The caller checks the upload's size and stores the result. Word documents and
PDFs are read in a limited child process (artifactflow.extraction); the rest
here is pure functions.
"""

import codecs
import mimetypes
import re
import unicodedata
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext

from artifactflow.documents import DocumentError, docx_markdown, pdf_text
from artifactflow.extraction import document_read, document_read_async
from artifactflow.names import name_clean

ID_MAX_LENGTH = 100
TITLE_MAX_LENGTH = 300  # Artifact.title's max_length

# What counts as text, by extension, and the type it is stored as.
TEXT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".log": "text/plain",
    ".rst": "text/x-rst",
    ".tex": "text/x-tex",
    ".bib": "text/x-bibtex",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".ipynb": "application/x-ipynb+json",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "text/xml",
    ".yaml": "text/x-yaml",
    ".yml": "text/x-yaml",
    ".toml": "text/x-toml",
    ".ini": "text/plain",
    ".cfg": "text/plain",
    ".conf": "text/plain",
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript",
    ".jsx": "text/javascript",
    ".css": "text/css",
    ".sql": "text/x-sql",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".r": "text/x-r",
    ".rb": "text/x-ruby",
    ".go": "text/x-go",
    ".rs": "text/x-rust",
    ".java": "text/x-java",
    ".kt": "text/x-kotlin",
    ".c": "text/x-c",
    ".h": "text/x-c",
    ".cpp": "text/x-c++",
    ".hpp": "text/x-c++",
    ".cs": "text/x-csharp",
    ".php": "text/x-php",
    ".swift": "text/x-swift",
    ".diff": "text/x-diff",
    ".patch": "text/x-diff",
}
# Documents read into text, and the type the text is stored as.
_DOCUMENT_READERS = {".docx": (docx_markdown, "text/markdown"), ".pdf": (pdf_text, "text/plain")}
_UNKNOWN_TYPE = "application/octet-stream"

_ID_UNSAFE = re.compile(r"[^\w\-.]")
_UNDERSCORES = re.compile(r"_{2,}")
_EXTENSION_MAX_LENGTH = 16
_BOMS = (
    # UTF-32 first: its little-endian BOM begins with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class UploadError(Exception):
    """An upload we cannot accept; the message is for the user."""


@dataclass(frozen=True)
class ConvertedUpload:
    kind: Literal["text", "file"]
    content: str  # the text of a text artifact, "" for a file
    content_type: str
    title: str
    size: int  # bytes uploaded


def upload_too_large_message() -> str:
    """What a user is told of a file over the limit, wherever it is refused
    (the browser, the request-body cap, the view)."""
    return gettext("This file is larger than the upload limit of %(limit)s.") % {
        "limit": filesizeformat(settings.ARTIFACT_UPLOAD_MAX_BYTES)
    }


def artifact_id_from_filename(filename: str, *, taken: Container[str]) -> str:
    """A safe artifact id for an uploaded file, unlike any id in `taken`.

    "../../etc/passwd" becomes "passwd", "重要 报告.md" "重要_报告.md", and
    "report.md" becomes "report_1.md" when "report.md" is taken.
    """
    name = _UNDERSCORES.sub("_", _ID_UNSAFE.sub("_", _base_name(filename)))
    # No hidden files, no "..", and no "_" left at the edges by spaces or symbols.
    stem, extension = _extension_split(name.strip("._"))
    stem = stem.rstrip("._") or "upload"
    candidate = _name_shortened(stem, extension, limit=ID_MAX_LENGTH)
    number = 0
    while candidate in taken:
        number += 1
        candidate = _name_shortened(stem, f"_{number}{extension}", limit=ID_MAX_LENGTH)
    return candidate


@dataclass(frozen=True)
class _Document:
    """An upload whose text a reader of artifactflow.documents gets out."""

    read: Callable[[bytes], str]
    content_type: str
    title: str


def convert_upload(
    *, filename: str, data: bytes, content_type: str = "", pages_marked: bool = False
) -> ConvertedUpload:
    """What to store for an uploaded file: its text, or the file as it is.

    Text formats are read as UTF-8 (or UTF-16/32 when a byte order mark says
    so), Word documents become markdown and PDFs plain text (with
    `pages_marked`, each page after the first starting at a form feed:
    artifactflow.documents.pdf_text). Anything else is kept as a file, typed
    by its extension or else by what the browser said.
    """
    upload = _upload_sorted(filename=filename, data=data, content_type=content_type)
    if isinstance(upload, ConvertedUpload):
        return upload
    options = {"pages_marked": True} if pages_marked and upload.read is pdf_text else {}
    try:
        content = document_read(read=upload.read, data=data, **options)
    except DocumentError as error:
        raise UploadError(str(error)) from None
    return _document_converted(upload, content=content, data=data)


async def convert_upload_async(*, filename: str, data: bytes, content_type: str = "") -> ConvertedUpload:
    """convert_upload for an async view: a document is read without holding a
    thread. Decoding megabytes of text is done in one, off the event loop."""
    upload = await sync_to_async(_upload_sorted)(filename=filename, data=data, content_type=content_type)
    if isinstance(upload, ConvertedUpload):
        return upload
    try:
        content = await document_read_async(read=upload.read, data=data)
    except DocumentError as error:
        raise UploadError(str(error)) from None
    return _document_converted(upload, content=content, data=data)


def upload_name(filename: str) -> str:
    """The name an upload is kept and titled under: the file's own, with no
    directories or hidden characters, no longer than a title."""
    stem, extension = _extension_split(_base_name(filename))
    return _name_shortened(stem, extension, limit=TITLE_MAX_LENGTH) or "upload"


def upload_has_text(filename: str) -> bool:
    """Whether convert_upload reads a file of this name as text (by its extension)."""
    extension = _extension_split(upload_name(filename))[1].lower()
    return extension in TEXT_TYPES or extension in _DOCUMENT_READERS


def _upload_sorted(*, filename: str, data: bytes, content_type: str) -> ConvertedUpload | _Document:
    """The upload converted, or the document its text is to be read from."""
    title = upload_name(filename)
    extension = _extension_split(title)[1].lower()

    if extension in TEXT_TYPES:
        content = _text_decoded(data, title=title)
        return ConvertedUpload(
            kind="text", content=content, content_type=TEXT_TYPES[extension], title=title, size=len(data)
        )
    if extension in _DOCUMENT_READERS:
        read, stored_type = _DOCUMENT_READERS[extension]
        return _Document(read=read, content_type=stored_type, title=title)
    stored_type = mimetypes.guess_type(title)[0] or _declared_type(content_type) or _UNKNOWN_TYPE
    return ConvertedUpload(kind="file", content="", content_type=stored_type, title=title, size=len(data))


def _document_converted(upload: _Document, *, content: str, data: bytes) -> ConvertedUpload:
    return ConvertedUpload(
        kind="text", content=content, content_type=upload.content_type, title=upload.title, size=len(data)
    )


def _base_name(filename: str) -> str:
    """The file's own name: no directories (either separator), no control or
    format characters (a right-to-left override makes "gpj.exe" read as "exe.jpg")."""
    # Browsers on macOS send decomposed accents; composed, they are letters.
    name = unicodedata.normalize("NFC", name_clean(filename))
    return re.split(r"[/\\]", name)[-1].strip()


def _extension_split(name: str) -> tuple[str, str]:
    """("report", ".md") from "report.md"; a long or leading dot part is no extension."""
    stem, dot, extension = name.rpartition(".")
    if not stem or not dot or len(extension) + 1 > _EXTENSION_MAX_LENGTH:
        return name, ""
    return stem, dot + extension


def _name_shortened(stem: str, ending: str, *, limit: int) -> str:
    """stem + ending in at most `limit` characters, cutting the stem, never the ending."""
    if len(stem) + len(ending) > limit:
        stem = stem[: limit - len(ending)].rstrip("._")
    return stem + ending


def _declared_type(content_type: str) -> str:
    """The browser's type when it is well-formed; it is a guess from the same name."""
    media_type = content_type.split(";")[0].strip().lower()
    return media_type if re.fullmatch(r"[a-z0-9.+-]+/[a-z0-9.+-]+", media_type) else ""


def _text_decoded(data: bytes, *, title: str) -> str:
    encoding = next((encoding for bom, encoding in _BOMS if data.startswith(bom)), "utf-8")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        raise UploadError(
            gettext("%(title)s is not UTF-8 text. Save it as UTF-8 and upload it again.") % {"title": title}
        ) from None
    # NUL never occurs in text, and the database could not store it.
    if "\x00" in text:
        raise UploadError(gettext("%(title)s looks like a binary file, not text.") % {"title": title})
    # One line ending, so agents' exact-match edits work on uploads too.
    return text.replace("\r\n", "\n").replace("\r", "\n")
