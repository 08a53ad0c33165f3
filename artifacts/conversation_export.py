"""A conversation's branch exported: as Markdown, as a Word document, and as a
.zip of the Markdown with each of the branch's artifacts in a file of its own.

The branch is the one the conversation's page shows, its turns from the root
down; the artifacts are each one's newest saved version on that branch (a
running turn's unsaved work is not exported). It lives with the artifacts,
above the conversations, because it reads both.

The zip's layout:

    conversation.md
    artifacts/<artifact id>.<extension>   one per artifact, text as it is
                                          written, an uploaded file as uploaded
    uploads/<file name>                   a Word document, PDF or text file the
                                          person uploaded, as uploaded (its text,
                                          as the branch has it, is in artifacts/)
    uploads/LEFT_OUT.txt                  the uploads past UPLOADS_MAX_BYTES, if any
"""

import io
import mimetypes
import re
import unicodedata
import zipfile
from dataclasses import dataclass

from django.utils.translation import gettext

from artifactflow.names import name_clean
from conversations.models import Conversation, Message
from conversations.tree import message_path

from .branches import branch_heads, branch_shown, version_is_text, version_title
from .export import docx_from_markdown
from .models import ArtifactVersion

CONVERSATION_FILE = "conversation.md"
ARTIFACTS_FOLDER = "artifacts"
UPLOADS_FOLDER = "uploads"
LEFT_OUT_FILE = "LEFT_OUT.txt"
# The zip is made in memory: the uploads' originals it carries are bounded
# (each is at most ARTIFACT_UPLOAD_MAX_BYTES); those past the bound are named
# in LEFT_OUT.txt, to download from the pane.
UPLOADS_MAX_BYTES = 100 * 1024 * 1024
# Bytes, not characters: file systems count bytes (255 on most), and the
# folder and a "-2" must still fit.
FILE_NAME_MAX_BYTES = 120
# A download's own name, alone in its folder: a title of the longest a
# question gives (conversations.lifecycle.TITLE_LENGTH) fits whole in Chinese,
# three bytes a character, with ".docx" after it.
DOWNLOAD_NAME_MAX_BYTES = 250
_EXTENSIONS = {"text/markdown": ".md", "text/plain": ".txt", "text/csv": ".csv", "application/json": ".json"}
# Path separators and the other characters Windows refuses (control characters go before: name_clean).
_UNSAFE = re.compile(r'[/\\:*?"<>|]+')
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{n}" for n in range(10)), *(f"LPT{n}" for n in range(10))}
_TEXT_TYPE = "text/markdown; charset=utf-8"
_CUT = "…"


@dataclass(frozen=True)
class Export:
    filename: str
    content_type: str
    data: bytes


def user_display_name(user) -> str:
    return user.get_full_name().strip() or user.get_username()


def _turns(conversation: Conversation) -> list[Message]:
    if conversation.active_branch_id is None:
        return []
    return message_path(message_id=conversation.active_branch_id)


def _title(conversation: Conversation) -> str:
    return conversation.title or gettext("Untitled")


def _turns_markdown(conversation: Conversation) -> str:
    """The branch's questions and answers, each under a heading of its own."""
    parts = []
    answer_heading = gettext("Answer")
    no_answer = gettext("No answer.")
    for number, message in enumerate(_turns(conversation), start=1):
        question_heading = gettext("Question %(number)s") % {"number": number}
        parts.append(f"## {question_heading}\n\n{message.content.strip()}\n")
        parts.append(f"### {answer_heading}\n\n{message.response.strip() or f'*{no_answer}*'}\n")
    return "\n".join(parts)


def conversation_markdown(*, conversation: Conversation) -> Export:
    text = f"# {_title(conversation)}\n\n{_turns_markdown(conversation)}"
    return Export(
        filename=_download_name(conversation, extension=".md"),
        content_type=_TEXT_TYPE,
        data=text.encode(),
    )


def conversation_docx(*, conversation: Conversation, user) -> Export:
    data = docx_from_markdown(
        markdown=_turns_markdown(conversation), title=_title(conversation), author=user_display_name(user)
    )
    return Export(
        filename=_download_name(conversation, extension=".docx"),
        content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        data=data,
    )


def conversation_zip(*, conversation: Conversation) -> Export:
    """The conversation and its artifacts, and the files the person uploaded
    as they uploaded them: whoever takes their work away gets their files back."""
    buffer = io.BytesIO()
    taken: set[str] = set()
    originals_taken: set[str] = set()
    budget, left_out = UPLOADS_MAX_BYTES, []
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(CONVERSATION_FILE, conversation_markdown(conversation=conversation).data)
        for head in branch_heads(branch=branch_shown(conversation=conversation)):
            name, data = _artifact_file(head)
            archive.writestr(f"{ARTIFACTS_FOLDER}/{_unique(name, taken)}", data)
            # An upload read into text has its file too; one that is not text is in artifacts/ already.
            if not (head.artifact.file and version_is_text(head)):
                continue
            name = _upload_name(head.artifact)
            if head.artifact.file.size > budget:
                left_out.append(name)
                continue
            budget -= head.artifact.file.size
            with head.artifact.file.open("rb") as file:
                archive.writestr(f"{UPLOADS_FOLDER}/{_unique(name, originals_taken)}", file.read())
        if left_out:
            note = gettext("These uploads were too large to add to this download; download each from its artifact:")
            archive.writestr(f"{UPLOADS_FOLDER}/{LEFT_OUT_FILE}", "\n".join([note, *left_out]) + "\n")
    return Export(
        filename=_download_name(conversation, extension=".zip"),
        content_type="application/zip",
        data=buffer.getvalue(),
    )


def _download_name(conversation: Conversation, *, extension: str) -> str:
    return safe_file_name(
        _title(conversation), extension=extension, fallback="conversation", max_bytes=DOWNLOAD_NAME_MAX_BYTES
    )


def _artifact_file(head: ArtifactVersion) -> tuple[str, bytes]:
    """A file name and the bytes: the text of the branch's version, or the uploaded file."""
    artifact = head.artifact
    if version_is_text(head):
        extension = _EXTENSIONS.get(artifact.content_type) or mimetypes.guess_extension(artifact.content_type) or ".txt"
        name = safe_file_name(artifact.artifact_id, extension=extension, fallback=version_title(head) or "artifact")
        return name, head.content.encode()
    name = safe_file_name(artifact.artifact_id, extension=_upload_extension(artifact), fallback="file")
    with artifact.file.open("rb") as file:
        return name, file.read()


def _upload_extension(artifact) -> str:
    stem, dot, extension = (artifact.metadata.get("original_name") or artifact.artifact_id).rpartition(".")
    return f".{extension}" if dot and stem else ""


def _upload_name(artifact) -> str:
    """The name the file was uploaded under, made safe (the id when it has none)."""
    original = artifact.metadata.get("original_name") or ""
    return safe_file_name(original, extension=_upload_extension(artifact), fallback=artifact.artifact_id)


def safe_file_name(name: str, *, extension: str, fallback: str, max_bytes: int = FILE_NAME_MAX_BYTES) -> str:
    """`name` as one file name on any system: no folder, no control, format
    or reserved character, no leading dot, at most `max_bytes` long (a name
    cut short says so with "…"), ending in `extension`."""
    extension = _UNSAFE.sub("", name_clean(extension))
    stem = _UNSAFE.sub("_", unicodedata.normalize("NFC", name_clean(name))).strip(" ._")
    if extension and stem.lower().endswith(extension.lower()):
        stem = stem[: -len(extension)].rstrip(" .")
    budget = max_bytes - len(extension.encode())
    if len(stem.encode()) > budget:
        stem = stem.encode()[: budget - len(_CUT.encode())].decode(errors="ignore").rstrip(" .") + _CUT
    if not stem:
        stem = _UNSAFE.sub("_", name_clean(fallback)).strip(" ._")[:40] or "file"
    if stem.split(".")[0].upper() in _WINDOWS_RESERVED:
        stem = f"_{stem}"
    return stem + extension


def _unique(name: str, taken: set[str]) -> str:
    """`name`, or with "-2", "-3"… before its extension when the zip has it already (in any case)."""
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    candidate, number = name, 1
    while candidate.lower() in taken:
        number += 1
        candidate = f"{stem}-{number}" + (f".{extension}" if dot else "")
    taken.add(candidate.lower())
    return candidate
