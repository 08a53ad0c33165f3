"""The citation check after a turn: every quotation the answer or a report
the turn wrote attributes to a numbered source (artifactflow.citations) is
looked for in that source's text as the agents read it: the snapshot of a web
page kept in the conversation, or a library document the owner may read. A
quotation is found when its words are there in order, whatever the spaces,
punctuation and full-width forms (artifactflow.textsearch.words_comparable). A
source with no text kept (a page no agent read, another site's address) is
not checked, and says so. Bounded: at most QUOTES_MAX quotations and
CHECK_SECONDS in all; what is left when time runs out is not checked."""

import time

from artifactflow.citations import ANSWER_WHERE, CITATIONS_KEY, Reference, citations_read
from artifactflow.markdown import markdown_tokens
from artifactflow.textsearch import words_comparable
from artifacts.models import ArtifactVersion
from artifacts.selectors import MARKDOWN_TYPES
from library.selectors import library_documents, library_url_id, snapshot_find

QUOTES_MAX = 200
CHECK_SECONDS = 2.0


def citations_check(*, run, answer: str) -> dict | None:
    """The check of the quotations of the run's answer and of the reports it
    saved, as stored on its message (Message.metadata["citations"]): how many
    were checked and how many could not be, and those not found, each with
    where it is, its source's number and name; None when they quote nothing."""
    deadline = time.monotonic() + CHECK_SECONDS
    conversation = run.message.conversation
    saved = {}
    # The last version the run saved of each artifact: what the report says now.
    for version in ArtifactVersion.objects.filter(run=run).select_related("artifact").order_by("version"):
        saved[version.artifact.artifact_id] = version
    texts = [(ANSWER_WHERE, answer)] + [
        (artifact_id, version.content)
        for artifact_id, version in saved.items()
        if version.artifact.content_type in MARKDOWN_TYPES
    ]
    quotes = [
        (where, quote, reference)
        for where, text in texts
        for quote, reference in citations_read(markdown_tokens(text)).quotes()
    ][:QUOTES_MAX]
    if not quotes:
        return None
    sources: dict[str, str | None] = {}
    checked, unchecked, missing = 0, 0, []
    for where, quote, reference in quotes:
        if time.monotonic() > deadline:
            unchecked += 1
            continue
        if reference.href not in sources:
            source = _source_text(reference=reference, conversation=conversation)
            sources[reference.href] = words_comparable(source) if source is not None else None
        source = sources[reference.href]
        if source is None:
            unchecked += 1
            continue
        checked += 1
        if words_comparable(quote) not in source:
            missing.append({"where": where, "number": reference.number, "quote": quote, "title": reference.title})
    return {"checked": checked, "unchecked": unchecked, "missing": missing}


def _source_text(*, reference: Reference, conversation) -> str | None:
    """The text the agents read of the source, if any was kept: a library
    document as its owner's agents read it, a web page as read there."""
    document_id = library_url_id(reference.href)
    if document_id is not None:
        documents = library_documents(user=conversation.owner, project=conversation.project_id)
        document = documents.filter(pk=document_id).only("content").first()
        return document.content if document is not None else None
    if not reference.href.lower().startswith(("http://", "https://")):
        return None
    snapshot = snapshot_find(conversation=conversation, url=reference.href)
    return snapshot.text if snapshot is not None else None


def citations_keep(*, message, check: dict | None) -> None:
    """The turn's citation check on its message, for the answer, the reports and the Activity to show."""
    metadata = {key: value for key, value in message.metadata.items() if key != CITATIONS_KEY}
    if check is not None:
        metadata[CITATIONS_KEY] = check
    if metadata != message.metadata:
        message.metadata = metadata
        message.save(update_fields=["metadata"])
