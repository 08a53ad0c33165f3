"""Documents read in a child process that has limits, never in the caller's.

The parsers (artifactflow.documents) bound what they are asked to do, but a
crafted file finds the slow or greedy corners of pypdf and python-docx that
no size check foresees. So every upload, library document and fetched PDF is
read by `python -m artifactflow.extraction`, a process of its own that limits
itself before it reads a byte (address space, CPU seconds, no files, no core)
and is killed when its time is up. It gets no environment, so no secret. The
caller gets the text or a DocumentError that says what went wrong.

The async form awaits the child on the event loop, so a web request that
converts an upload holds none of the server's threads (asyncio itself waits
for the child's exit in a small thread of its own on Python 3.11). At most
EXTRACT_CONCURRENCY documents are read at once in a process; the rest wait
for a turn, up to the time a reading may take.

Starting the child costs about 0.3 s (mostly the parsers' imports;
benchmarks/extraction.py measures it), small beside an upload.
"""

import asyncio
import dataclasses
import functools
import json
import logging
import resource
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext, gettext_lazy

from artifactflow.documents import (
    DocumentError,
    DocumentUnreadableError,
    PdfFirstPages,
    PdfLockedError,
    docx_markdown,
    pdf_first_pages,
    pdf_text,
)

logger = logging.getLogger(__name__)

_READERS = {read.__name__: read for read in (docx_markdown, pdf_text, pdf_first_pages)}
_KINDS = {
    "docx_markdown": gettext_lazy("Word document"),
    "pdf_text": gettext_lazy("PDF"),
    "pdf_first_pages": gettext_lazy("PDF"),
}
_ERRORS = {error.__name__: error for error in (DocumentError, PdfLockedError)}
# Run from the directory that holds the artifactflow package: `-m` finds it
# there, with no PYTHONPATH in the child's (empty) environment.
_ROOT = Path(__file__).resolve().parents[1]
_SLOT_WAIT_STEP = 0.05


def document_read(*, read, data: bytes, **options):
    """`read(data, **options)` (a reader of artifactflow.documents) in a
    limited child process: its result, or DocumentError."""
    slots = _slots(settings.EXTRACT_CONCURRENCY)
    if not slots.acquire(timeout=settings.EXTRACT_TIMEOUT):
        raise DocumentError(_busy_message())
    try:
        try:
            done = subprocess.run(
                _command(),
                input=_request(read=read, options=options) + data,
                capture_output=True,
                timeout=settings.EXTRACT_TIMEOUT,
                cwd=_ROOT,
                env={},
            )
        except subprocess.TimeoutExpired:
            # subprocess.run killed the child and waited for it.
            raise DocumentError(_too_long_message(read)) from None
    finally:
        slots.release()
    return _answer(read=read, returncode=done.returncode, stdout=done.stdout, stderr=done.stderr)


async def document_read_async(*, read, data: bytes, **options):
    """document_read for an event loop: awaits the child, holding no thread."""
    slots = _slots(settings.EXTRACT_CONCURRENCY)
    given_up = time.monotonic() + settings.EXTRACT_TIMEOUT
    # A threading semaphore, so that async and threaded callers of one
    # process share the bound; waited for without blocking the loop.
    while not slots.acquire(blocking=False):
        if time.monotonic() > given_up:
            raise DocumentError(_busy_message())
        await asyncio.sleep(_SLOT_WAIT_STEP)
    try:
        child = await asyncio.create_subprocess_exec(
            *_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=_ROOT,
            env={},
        )
        try:
            stdout, stderr = await asyncio.wait_for(
                child.communicate(_request(read=read, options=options) + data), settings.EXTRACT_TIMEOUT
            )
        except TimeoutError:
            raise DocumentError(_too_long_message(read)) from None
        finally:
            # Timed out, or the request was cancelled (the person left): the child goes too.
            if child.returncode is None:
                child.kill()
                await child.wait()
    finally:
        slots.release()
    return _answer(read=read, returncode=child.returncode, stdout=stdout, stderr=stderr)


@functools.cache
def _slots(concurrency: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(concurrency)


def _command() -> list[str]:
    memory = settings.EXTRACT_MAX_MEMORY_MB * 1024 * 1024
    cpu = max(int(settings.EXTRACT_TIMEOUT + 0.999), 1)
    # -E -s: nothing from the environment or the user's site-packages.
    return [sys.executable, "-E", "-s", "-m", "artifactflow.extraction", str(memory), str(cpu)]


def _request(*, read, options: dict) -> bytes:
    """The first line the child reads: which reader, with what options; the document follows."""
    if _READERS.get(read.__name__) is not read:
        raise ValueError(f"{read!r} is not a reader of artifactflow.documents")
    return json.dumps({"read": read.__name__, "options": options}).encode() + b"\n"


def _answer(*, read, returncode: int, stdout: bytes, stderr: bytes):
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    if returncode == 0 and isinstance(answer, dict):
        if "error" not in answer:
            result = answer["result"]
            return PdfFirstPages(**result) if read is pdf_first_pages else result
        if answer["error"] == "memory":
            raise DocumentError(_memory_message(read))
        if answer["error"] == DocumentUnreadableError.__name__:
            raise DocumentUnreadableError(answer["message"], reason=answer["reason"])
        raise _ERRORS[answer["error"]](answer["message"])
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise DocumentError(_too_long_message(read))
    logger.warning("Document reader exited with %s: %s", returncode, stderr[-2000:].decode(errors="replace"))
    raise DocumentError(
        gettext("Could not read this %(kind)s: its reader stopped unexpectedly.") % {"kind": _kind(read)}
    )


def _kind(read) -> str:
    return str(_KINDS[read.__name__])


def _too_long_message(read) -> str:
    return gettext(
        "This %(kind)s took too long to read (over %(seconds)s seconds). "
        "Split it into smaller parts, or save it again from the program that made it, and upload that."
    ) % {"kind": _kind(read), "seconds": f"{settings.EXTRACT_TIMEOUT:g}"}


def _memory_message(read) -> str:
    return gettext(
        "This %(kind)s needs too much memory to read. "
        "Split it into smaller parts, or save it again from the program that made it, and upload that."
    ) % {"kind": _kind(read)}


def _busy_message() -> str:
    return gettext("The server is busy reading other documents. Try again in a minute.")


def _child_limited(*, memory: int, cpu: int) -> None:
    for limit, value in (
        (resource.RLIMIT_AS, memory),
        # SIGXCPU at the soft limit; the hard one kills if that is caught.
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, value if isinstance(value, tuple) else (value, value))


def _child_main(memory: int, cpu: int) -> None:
    """The child: limits first, then one request from stdin, one answer to stdout."""
    _child_limited(memory=memory, cpu=cpu)
    # pypdf warns about every oddity of a broken file; a crafted one has millions.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    stdin = sys.stdin.buffer
    request = json.loads(stdin.readline())
    data = stdin.read()
    try:
        result = _READERS[request["read"]](data, **request["options"])
        if dataclasses.is_dataclass(result):
            result = dataclasses.asdict(result)
        answer = {"result": result}
    except MemoryError:
        answer = {"error": "memory"}
    except DocumentError as error:
        answer = {"error": type(error).__name__, "message": str(error), "reason": getattr(error, "reason", "")}
    sys.stdout.buffer.write(json.dumps(answer, ensure_ascii=False).encode())


if __name__ == "__main__":
    _child_main(int(sys.argv[1]), int(sys.argv[2]))
