import asyncio
import os
import time
from pathlib import Path

import pytest

from artifactflow import extraction
from artifactflow.documents import DocumentError, DocumentUnreadableError, PdfFirstPages, docx_markdown, pdf_text
from artifactflow.documents import pdf_first_pages as first_pages
from artifactflow.extraction import document_read, document_read_async
from tests.factories import docx_of_xml, pdf_bytes, pdf_sharing_one_stream

# 3 pages drawing one 2.8 MB stream: under every size limit, and some 20
# seconds of pypdf's parsing.
SLOW_PDF = pdf_sharing_one_stream(pages=3, content=b"0 0 m 1 1 l S\n" * 200_000)
# Starting the child and a second of reading, with room for a busy machine.
BOUND = 15.0


def _readers() -> set[int]:
    """The pids of this process's children reading a document."""
    pids = set()
    for children in Path("/proc/self/task").glob("*/children"):
        try:
            # A thread may end between the listing and the read.
            listed = children.read_text().split()
        except FileNotFoundError:
            continue
        for pid in listed:
            try:
                if b"artifactflow.extraction" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.add(int(pid))
            except FileNotFoundError:
                pass
    return pids


def _limits() -> dict[str, list[str]] | None:
    """The soft and hard limits of the reading child, once it has set them."""
    for pid in _readers():
        try:
            lines = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        limits = {line[:26].strip(): line[26:].split()[:2] for line in lines}
        if limits["Max address space"][0] != "unlimited":
            return limits
    return None


def test_a_document_is_read_in_a_child_process():
    assert document_read(read=pdf_text, data=pdf_bytes(["Page one", "Page two"])) == "Page one\n\nPage two"
    assert document_read(read=first_pages, data=pdf_bytes(["One", "Two"], title="T"), max_pages=1, max_chars=10) == (
        PdfFirstPages(title="T", text="One")
    )


def test_chinese_text_comes_back_whole():
    data = docx_of_xml("<w:p><w:r><w:t>重要的报告：效率如何</w:t></w:r></w:p>".encode())

    assert document_read(read=docx_markdown, data=data) == "重要的报告：效率如何"


def test_the_parsers_errors_come_back_as_theirs():
    with pytest.raises(DocumentUnreadableError, match="Could not read this PDF") as raised:
        document_read(read=pdf_text, data=b"%PDF-1.4 nothing")

    assert raised.value.reason


def test_a_reading_that_takes_too_long_is_stopped(settings):
    settings.EXTRACT_TIMEOUT = 1.0
    started = time.perf_counter()

    with pytest.raises(DocumentError, match=r"This PDF took too long to read \(over 1 seconds\)\. Split it"):
        document_read(read=pdf_text, data=SLOW_PDF)

    assert time.perf_counter() - started < BOUND
    assert not _readers()


def test_a_reading_that_needs_too_much_memory_is_stopped(settings):
    # 900,000 empty paragraphs: under the limits on tags, and some 250 MB parsed.
    settings.EXTRACT_MAX_MEMORY_MB = 150

    with pytest.raises(DocumentError, match=r"This Word document needs too much memory to read\. Split it"):
        document_read(read=docx_markdown, data=docx_of_xml(b"<w:p/>", repeat=900_000))


def test_when_every_slot_is_taken_the_next_reading_waits_then_gives_up(settings):
    settings.EXTRACT_CONCURRENCY, settings.EXTRACT_TIMEOUT = 1, 0.2
    slots = extraction._slots(1)
    slots.acquire()
    try:
        with pytest.raises(DocumentError, match="The server is busy reading other documents"):
            document_read(read=pdf_text, data=pdf_bytes(["One"]))
    finally:
        slots.release()

    settings.EXTRACT_TIMEOUT = 60
    assert document_read(read=pdf_text, data=pdf_bytes(["One"])) == "One"


async def test_the_child_is_limited_has_no_secrets_and_stops_when_its_reading_is_cancelled(settings):
    settings.EXTRACT_MAX_MEMORY_MB, settings.EXTRACT_TIMEOUT = 700, 50
    assert await document_read_async(read=pdf_text, data=pdf_bytes(["Page one"])) == "Page one"

    reading = asyncio.create_task(document_read_async(read=pdf_text, data=SLOW_PDF))
    deadline = time.monotonic() + BOUND
    # The child limits itself first thing, one limit after another, the core
    # file's last: wait for that, as the document is only read after it.
    while not (limits := _limits()) or limits["Max core file size"] != ["0", "0"]:
        assert time.monotonic() < deadline, "the child never limited itself"
        await asyncio.sleep(0.01)
    (pid,) = _readers()

    assert limits["Max address space"] == [str(700 * 1024 * 1024)] * 2
    assert limits["Max cpu time"] == ["50", "51"]
    assert limits["Max file size"] == limits["Max core file size"] == ["0", "0"]
    assert os.environ["SECRET_KEY"] and Path(f"/proc/{pid}/environ").read_bytes() == b""
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading

    assert not _readers()


async def test_the_async_reading_is_stopped_in_time_too(settings):
    settings.EXTRACT_TIMEOUT = 1.0

    with pytest.raises(DocumentError, match="took too long"):
        await document_read_async(read=pdf_text, data=SLOW_PDF)

    assert not _readers()


def test_only_the_documents_readers_run():
    with pytest.raises(ValueError, match="not a reader"):
        document_read(read=print, data=b"")
