"""The team library's writes: documents people add (on the Library page) and
staff (in the admin), read once into text, and removed by whoever added them
or by staff. A document limited to a group is seen by its members and its
uploader alone, by people and agents alike (selectors.library_visible): an
agent sees what the owner of the conversation it works for may see.

The web pages the crawl agent reads are kept too, as snapshots of the
conversation it read them in (snapshot_keep).
"""

import hashlib
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError, transaction
from django.db.models import Sum
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext
from django_q.tasks import async_task

from artifacts.services import artifact_upload_check
from artifacts.uploads import (
    ConvertedUpload,
    UploadError,
    convert_upload,
    upload_has_text,
    upload_name,
    upload_too_large_message,
)

from .models import LibraryDocument, LibraryPassage, WebSnapshot
from .passages import passages_split
from .selectors import library_document_get, library_document_removable
from .vectors import vectors_index_queue

# The django-q2 task that reads a queued document's text.
READ_TASK = "library.services.library_document_read_task"
# A document still queued this long after it was queued lost its reading (a
# worker killed, a task dropped): the sweep queues it again. Well past the
# longest a reading may take (ARTIFACTFLOW_EXTRACT_TIMEOUT, 60 s).
READ_STALE = timedelta(minutes=10)
# How many documents one sweep queues again; the next sweep takes the rest.
SWEEP_MAX = 100


def library_file_read(*, uploaded_file: UploadedFile) -> ConvertedUpload:
    """The text of an upload, or UploadError saying why there is none.

    The admin calls this while validating its form, so a file we cannot read
    is reported on the form rather than after it was saved.
    """
    artifact_upload_check(size=uploaded_file.size)
    uploaded_file.seek(0)
    return _text_read(
        filename=uploaded_file.name, data=uploaded_file.read(), content_type=uploaded_file.content_type or ""
    )


def _text_read(*, filename: str, data: bytes, content_type: str = "") -> ConvertedUpload:
    # A PDF's pages marked, for its passages to say which page they are on.
    converted = convert_upload(filename=filename, data=data, content_type=content_type, pages_marked=True)
    if converted.kind != "text":
        raise UploadError(
            gettext("%(name)s has no text we can read; upload markdown, text, Word (.docx) or PDF.")
            % {"name": converted.title}
        )
    if not converted.content.strip():
        raise UploadError(gettext("%(name)s contains no text.") % {"name": converted.title})
    return converted


def library_document_create(
    *,
    user,
    title: str = "",
    uploaded_file: UploadedFile | None = None,
    content: str | None = None,
    group=None,
    project=None,
) -> LibraryDocument:
    """Add a document to the library from an uploaded file (its text read
    here, its name the default title) or from markdown text; limited to
    `group` when one is given (the caller checks the user is in it), or to
    `project`'s conversations (the caller checks the user contributes to it)."""
    if (uploaded_file is None) == (content is None):
        raise ValueError("library_document_create takes uploaded_file or content, not both")
    document = LibraryDocument(
        title=title or "Untitled", content=content or "", uploaded_by=user, group=group, project=project
    )
    if uploaded_file is not None:
        converted = library_file_read(uploaded_file=uploaded_file)
        document.content, document.content_type = converted.content, converted.content_type
        document.title = title or converted.title
        uploaded_file.seek(0)
        # The converted title is the upload's own name with no directories or
        # control characters, and no longer than a title.
        document.original_file.save(converted.title, uploaded_file, save=False)
    document.save()
    return document


def library_document_delete(*, user, document_id: int) -> bool:
    """Removes the document if the user may; False for one they may not
    remove or cannot see, which the page answers alike (404)."""
    document = library_document_get(user=user, document_id=document_id)
    if document is None or not library_document_removable(user=user, document=document):
        return False
    if document.original_file:
        document.original_file.delete(save=False)
    document.delete()
    return True


def passages_of(document) -> Iterator[dict]:
    """The fields of the document's passages, first to last."""
    spans = passages_split(document.content, markdown=document.content_type == "text/markdown")
    for number, span in enumerate(spans, start=1):
        yield {
            "number": number,
            "start": span.start,
            "end": span.end,
            "heading": span.heading,
            "page": span.page,
            "title": document.title,
            "text": document.content[span.start : span.end],
        }


def library_passages_index(*, document: LibraryDocument) -> int:
    """Cuts the document into passages again, replacing those it had; how many it has now."""
    with transaction.atomic():
        document.passages.all().delete()
        passages = LibraryPassage.objects.bulk_create(
            LibraryPassage(document=document, **fields) for fields in passages_of(document)
        )
    return len(passages)


def snapshot_keep(*, conversation_id, url: str, title: str, content_type: str, text: str) -> WebSnapshot | None:
    """The snapshot of the page `url` as read now in the conversation: the one
    it has of that same text, else a new one; None when the conversation's
    snapshots already hold SNAPSHOTS_MAX_BYTES (the fetch is not refused for
    it: a citation of the page then opens the live page)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    kept = WebSnapshot.objects.filter(conversation_id=conversation_id, digest=digest, url=url).first()
    if kept is not None:
        return kept
    size = len(text.encode())
    held = WebSnapshot.objects.filter(conversation_id=conversation_id).aggregate(total=Sum("size"))["total"] or 0
    if held + size > settings.SNAPSHOTS_MAX_BYTES:
        return None
    return WebSnapshot.objects.create(
        conversation_id=conversation_id,
        url=url,
        title=title[:300],
        content_type=content_type[:100],
        text=text,
        digest=digest,
        size=size,
        fetched_at=timezone.now(),
    )


def snapshots_copy(*, source, conversation) -> int:
    """Gives `conversation` the snapshots of `source` (a conversation continued
    from it), so the answers it copies cite what they cited; how many."""
    copies = WebSnapshot.objects.bulk_create(
        WebSnapshot(
            conversation=conversation,
            **{field: getattr(snapshot, field) for field in ("url", "title", "content_type", "text", "digest", "size")},
            fetched_at=snapshot.fetched_at,
        )
        for snapshot in WebSnapshot.objects.filter(conversation=source)
    )
    return len(copies)


@dataclass
class BulkAdded:
    """What an upload of several files (or a .zip of them) added, and what it left out and why."""

    documents: list[LibraryDocument] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def library_documents_queue(*, user, uploaded_files: list[UploadedFile], group=None, project=None) -> BulkAdded:
    """Adds each file, and each file inside a .zip, as a queued document whose
    text a worker reads (READ_TASK: library_document_read), within the
    upload limit for each file and LIBRARY_BULK_MAX_FILES and
    LIBRARY_BULK_MAX_BYTES for them all; files the library cannot read, and
    those past the limits, are skipped and named with the reason."""
    added = BulkAdded()
    files: list[tuple[str, bytes]] = []
    for uploaded_file in uploaded_files:
        if uploaded_file.name.lower().endswith(".zip"):
            files += _zip_files(uploaded_file, skipped=added.skipped)
        else:
            uploaded_file.seek(0)
            files.append((uploaded_file.name, uploaded_file.read()))
    total = 0
    with transaction.atomic():
        for name, data in files:
            title = upload_name(name)
            why = ""
            if not upload_has_text(name):
                why = gettext("not a kind of file the library reads (markdown, text, Word or PDF)")
            elif len(added.documents) >= settings.LIBRARY_BULK_MAX_FILES:
                why = gettext("more than %(count)s files at once") % {"count": settings.LIBRARY_BULK_MAX_FILES}
            elif total + len(data) > settings.LIBRARY_BULK_MAX_BYTES:
                why = gettext("more than %(size)s in all") % {"size": filesizeformat(settings.LIBRARY_BULK_MAX_BYTES)}
            if why:
                added.skipped.append(f"{title}: {why}")
                continue
            total += len(data)
            document = LibraryDocument(
                title=title,
                content="",
                uploaded_by=user,
                group=group,
                project=project,
                status=LibraryDocument.Status.QUEUED,
            )
            document.original_file.save(title, ContentFile(data), save=False)
            document.save()
            added.documents.append(document)
            _read_enqueue(document)
    return added


def _zip_files(uploaded_file: UploadedFile, *, skipped: list[str]) -> list[tuple[str, bytes]]:
    """The files of a .zip, each at most the upload limit once unpacked and
    LIBRARY_BULK_MAX_BYTES in all (what its directory claims is not trusted:
    reading stops there); folders, and the hidden files operating systems
    add, left out. Files the library cannot read, and those past
    LIBRARY_BULK_MAX_FILES, are listed unread, for the caller to name."""
    limit, budget = settings.ARTIFACT_UPLOAD_MAX_BYTES, settings.LIBRARY_BULK_MAX_BYTES
    files, read = [], 0
    try:
        archive = zipfile.ZipFile(uploaded_file)
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        why = gettext("not a .zip that can be read")
        skipped.append(f"{upload_name(uploaded_file.name)}: {why}")
        return []
    for member in members:
        name = member.filename
        parts = name.replace("\\", "/").split("/")
        if member.is_dir() or "__MACOSX" in parts or parts[-1].startswith("."):
            continue
        if not upload_has_text(name) or read >= settings.LIBRARY_BULK_MAX_FILES:
            files.append((name, b""))
            continue
        if budget <= 0:
            why = gettext("more than %(size)s in all") % {"size": filesizeformat(settings.LIBRARY_BULK_MAX_BYTES)}
            skipped.append(f"{upload_name(name)}: {why}")
            continue
        try:
            with archive.open(member) as opened:
                data = opened.read(min(limit, budget) + 1)
        except (RuntimeError, zipfile.BadZipFile, NotImplementedError, OSError, EOFError):
            why = gettext("could not be unpacked (damaged or protected by a password)")
            skipped.append(f"{upload_name(name)}: {why}")
            continue
        if len(data) > limit:
            skipped.append(f"{upload_name(name)}: {upload_too_large_message()}")
            continue
        if len(data) > budget:
            # Past the whole's bytes: this one and the rest are not read.
            budget = 0
            why = gettext("more than %(size)s in all") % {"size": filesizeformat(settings.LIBRARY_BULK_MAX_BYTES)}
            skipped.append(f"{upload_name(name)}: {why}")
            continue
        budget -= len(data)
        read += 1
        files.append((name, data))
    return files


def _read_enqueue(document: LibraryDocument) -> None:
    transaction.on_commit(
        lambda: async_task(READ_TASK, document.pk, task_name=f"library-read-{document.pk}-{uuid.uuid4().hex[:8]}")
    )


def library_document_read(*, document_id: int) -> LibraryDocument | None:
    """Reads the text of a queued document from its file: indexed with its
    passages, or failed with the reason. A document no longer queued (read
    already, removed) is left alone: a task may run twice."""
    document = LibraryDocument.objects.filter(pk=document_id, status=LibraryDocument.Status.QUEUED).first()
    if document is None:
        return None
    try:
        with document.original_file.open("rb") as stored:
            data = stored.read()
        converted = _text_read(filename=document.original_file.name, data=data)
    except UploadError as error:
        document.status, document.error = LibraryDocument.Status.FAILED, str(error)
    except OSError:
        document.status, document.error = LibraryDocument.Status.FAILED, gettext("Its file is missing.")
    else:
        document.content, document.content_type = converted.content, converted.content_type
        document.status, document.error = LibraryDocument.Status.INDEXED, ""
    try:
        # Only these fields, and only if the row is still there: a document removed meanwhile stays removed.
        document.save(update_fields=["content", "content_type", "status", "error", "updated_at"])
    except DatabaseError:
        return None
    return document


def library_document_retry(*, user, document_id: int) -> LibraryDocument | None:
    """Queues a failed document to be read again, for whoever may remove it; None for anyone else."""
    document = library_document_get(user=user, document_id=document_id)
    if document is None or not library_document_removable(user=user, document=document):
        return None
    if document.status == LibraryDocument.Status.FAILED:
        with transaction.atomic():
            document.status, document.error = LibraryDocument.Status.QUEUED, ""
            document.save(update_fields=["status", "error", "updated_at"])
            _read_enqueue(document)
    return document


def library_sweep() -> int:
    """What the workers' schedule (library.apps, every five minutes) does:
    queues again the documents whose reading was lost, and the passages'
    vectors still to be made (those a failed embeddings service left);
    how many documents it queued again."""
    queued = 0
    stale = LibraryDocument.objects.filter(
        status=LibraryDocument.Status.QUEUED, updated_at__lt=timezone.now() - READ_STALE
    ).only("pk", "updated_at")
    for document in stale[:SWEEP_MAX]:
        with transaction.atomic():
            # Once, however many workers sweep at the same time.
            claimed = LibraryDocument.objects.filter(
                pk=document.pk, status=LibraryDocument.Status.QUEUED, updated_at=document.updated_at
            ).update(updated_at=timezone.now())
            if claimed:
                _read_enqueue(document)
                queued += 1
    vectors_index_queue()
    return queued


def library_document_read_task(document_id: int) -> None:
    """The worker's entry point (READ_TASK)."""
    library_document_read(document_id=document_id)
