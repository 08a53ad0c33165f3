"""Reading Word documents and PDFs, each against a baseline in the same run.

Crafted documents (10 MB of XML in a 60 KB .docx; a 6.6 KB PDF whose five
pages draw one 2.8 MB stream), read in this process as before (python-docx
paragraph by paragraph with its style lookup, pypdf page by page with its own
limits; stopped after BASELINE_SECONDS and the whole extrapolated from the
share read) against the bounded path: the parsers' limits, in the limited
child process. Ordinary documents (a 30-page PDF, a 50-page Word document)
read in this process against through the child: what starting it costs. And
the conversation page through the ASGI handler, its middleware all able to run
async (what lets the upload view hold no thread), against WhiteNoise's
sync-only middleware in the chain (the baseline).

Runs on its own (`python benchmarks/extraction.py`) or from benchmarks/run.py.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import asyncio
import io
import random
import time
import zlib

import docx
import pypdf
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIHandler
from django.test import Client, override_settings

from artifactflow.documents import DocumentError, docx_markdown, pdf_text
from artifactflow.extraction import document_read
from conversations import lifecycle
from tests.asgi import http_scope
from tests.factories import docx_of_xml, pdf_sharing_one_stream, pdf_written

BASELINE_SECONDS = 10.0
PAGE_REQUESTS = 100
WORDS = "the heat pump moves heat rather than making it while the refrigerant evaporates outside".split()


def _realistic_pdf(pages: int) -> bytes:
    """Pages of dense text set as TeX sets it (kerned TJ arrays), some 10 KB of content each."""
    rng = random.Random(1)

    def line() -> str:
        parts = []
        for _ in range(12):
            word = rng.choice(WORDS)
            cut = rng.randint(1, len(word))
            parts.append(f"({word[:cut]})28({word[cut:]})-333")
        return "[" + "".join(parts) + "]TJ"

    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [%s] >>" % (pages, b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(pages))),
    ]
    for index in range(pages):
        content = zlib.compress(
            ("BT /F1 9.96 Tf 72 720 Td " + " 0 -11.955 Td ".join(line() for _ in range(50)) + " ET").encode()
        )
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R"
            b" /Resources << /Font << /F1 %d 0 R >> >> >>" % (4 + 2 * index, 3 + 2 * pages)
        )
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(content), content))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_written(objects)


def _realistic_docx(pages: int) -> bytes:
    """Headings, paragraphs, a list and a table on each of `pages` pages."""
    document = docx.Document()
    rng = random.Random(1)
    for page in range(pages):
        document.add_heading(f"Section {page + 1}", level=2)
        for _ in range(4):
            document.add_paragraph(" ".join(rng.choice(WORDS) for _ in range(80)))
        document.add_paragraph("a point", style="List Bullet")
        table = document.add_table(rows=3, cols=3)
        for row in table.rows:
            for cell in row.cells:
                cell.text = rng.choice(WORDS)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _docx_as_before(data: bytes) -> tuple[float, float]:
    """Seconds python-docx spent, and the share of the paragraphs it read in them."""
    started = time.perf_counter()
    document = docx.Document(io.BytesIO(data))
    paragraphs = document.paragraphs
    done = 0
    while done < len(paragraphs) and time.perf_counter() - started < BASELINE_SECONDS:
        paragraphs[done].text.strip()
        paragraphs[done].style.name  # noqa: B018 -- the lookup that cost 1.3 ms a paragraph
        done += 1
    return time.perf_counter() - started, done / len(paragraphs)


def _pdf_as_before(data: bytes) -> tuple[float, float]:
    started = time.perf_counter()
    pages = pypdf.PdfReader(io.BytesIO(data)).pages
    done = 0
    while done < len(pages) and time.perf_counter() - started < BASELINE_SECONDS:
        pages[done].extract_text()
        done += 1
    return time.perf_counter() - started, done / len(pages)


def _bounded(read, data: bytes) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        outcome = f"{len(document_read(read=read, data=data)):,} characters"
    except DocumentError as error:
        outcome = f"refused: {str(error)[:60]}…"
    return time.perf_counter() - started, outcome


def _best(read, *args, times: int = 3) -> float:
    timings = []
    for _ in range(times):
        started = time.perf_counter()
        read(*args)
        timings.append(time.perf_counter() - started)
    return min(timings)


def _crafted() -> None:
    cases = [
        (
            "a .docx of 10 MB of XML",
            docx_markdown,
            _docx_as_before,
            docx_of_xml(b"<w:p><w:r><w:t>x</w:t></w:r></w:p>", repeat=285_714),
        ),
        (
            "a PDF of 5 pages drawing one 2.8 MB stream",
            pdf_text,
            _pdf_as_before,
            pdf_sharing_one_stream(pages=5, content=b"0 0 m 1 1 l S\n" * 200_000),
        ),
    ]
    for name, read, before, data in cases:
        seconds, share = before(data)
        whole = seconds / share
        bounded, outcome = _bounded(read, data)
        print(f"{name} ({len(data) / 1000:.1f} KB):")
        print(f"  read in this process as before (baseline): {seconds:6.1f} s for {share:.0%}, ~{whole:.0f} s whole")
        print(f"  limits, then the child process:             {bounded:6.2f} s, {outcome}")
        print(f"  ratio: {whole / bounded:.0f}x sooner")


def _ordinary() -> None:
    for name, read, data in [
        ("a 30-page PDF", pdf_text, _realistic_pdf(30)),
        ("a 50-page Word document", docx_markdown, _realistic_docx(50)),
    ]:
        in_process = _best(read, data)
        child = _best(lambda data, read=read: document_read(read=read, data=data), data)
        print(f"{name} ({len(data) / 1000:.0f} KB, best of 3):")
        print(f"  read in this process (baseline): {in_process * 1000:7.0f} ms")
        print(f"  read in the child process:       {child * 1000:7.0f} ms")
        print(f"  ratio: {child / in_process:.2f}x, the child's start {(child - in_process) * 1000:.0f} ms")


def _page_seconds(handler: ASGIHandler, path: str, cookie: str) -> float:
    async def get():
        asked = False

        async def receive():
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": b""}
            await asyncio.Event().wait()

        async def send(message):
            pass

        await handler(http_scope(method="GET", path=path, headers=[(b"cookie", cookie.encode())]), receive, send)

    async def run():
        for _ in range(10):
            await get()
        started = time.perf_counter()
        for _ in range(PAGE_REQUESTS):
            await get()
        return (time.perf_counter() - started) / PAGE_REQUESTS

    return asyncio.run(run())


def _middleware_chain() -> None:
    user, _ = get_user_model().objects.get_or_create(username="bench-extraction")
    conversation = lifecycle.conversation_start(user=user, content="How do heat pumps work?", enqueue=False)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    path = conversation.get_absolute_url()
    sync_chain = [
        "whitenoise.middleware.WhiteNoiseMiddleware" if m == "artifactflow.middleware.StaticFilesMiddleware" else m
        for m in settings.MIDDLEWARE
    ]
    with override_settings(MIDDLEWARE=sync_chain):
        sync_handler = ASGIHandler()
    async_handler = ASGIHandler()
    # Taken in turns, the best of each: a busy machine slows both alike.
    before, after = (
        min(timings)
        for timings in zip(
            *(
                (_page_seconds(sync_handler, path, cookie), _page_seconds(async_handler, path, cookie))
                for _ in range(5)
            ),
            strict=True,
        )
    )
    print(f"a conversation page through the ASGI handler, {PAGE_REQUESTS} requests, best of 5 taken in turns:")
    print(f"  with WhiteNoise's sync middleware (baseline): {before * 1000:6.2f} ms a page")
    print(f"  every middleware able to run async:           {after * 1000:6.2f} ms a page")
    print(f"  ratio: {after / before:.2f}x")


def main():
    _crafted()
    _ordinary()
    _middleware_chain()


if __name__ == "__main__":
    main()
