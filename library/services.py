"""The team library's writes: documents people add (on the Library page) and
staff (in the admin), read once into text, and removed by whoever added them
or by staff. A document limited to a group is seen by its members and its
uploader alone, by people and agents alike (selectors.library_visible): an
agent sees what the owner of the conversation it works for may see.

The web pages the crawl agent reads are kept too, as snapshots of the
conversation it read them in (snapshot_keep).
"""

import hashlib
from collections.abc import Iterator

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext

from artifacts.services import artifact_upload_check
from artifacts.uploads import ConvertedUpload, UploadError, convert_upload

from .models import LibraryDocument, LibraryPassage, WebSnapshot
from .passages import passages_split
from .selectors import library_document_get, library_document_removable


def library_file_read(*, uploaded_file: UploadedFile) -> ConvertedUpload:
    """The text of an upload, or UploadError saying why there is none.

    The admin calls this while validating its form, so a file we cannot read
    is reported on the form rather than after it was saved.
    """
    artifact_upload_check(size=uploaded_file.size)
    uploaded_file.seek(0)
    converted = convert_upload(
        filename=uploaded_file.name,
        data=uploaded_file.read(),
        content_type=uploaded_file.content_type or "",
    )
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
) -> LibraryDocument:
    """Add a document to the library from an uploaded file (its text read
    here, its name the default title) or from markdown text; limited to
    `group` when one is given (the caller checks the user is in it)."""
    if (uploaded_file is None) == (content is None):
        raise ValueError("library_document_create takes uploaded_file or content, not both")
    document = LibraryDocument(title=title or "Untitled", content=content or "", uploaded_by=user, group=group)
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
