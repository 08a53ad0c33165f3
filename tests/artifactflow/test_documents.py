import io

import pypdf
import pytest

from artifactflow.documents import DocumentUnreadableError, PdfLockedError, pdf_first_pages, pdf_text
from tests.factories import pdf_bytes


def test_pdf_text_reads_every_page():
    assert pdf_text(pdf_bytes(["Page one", "Page two"])) == "Page one\n\nPage two"


def test_first_pages_stop_at_the_page_limit_and_keep_the_title():
    pdf = pdf_first_pages(pdf_bytes(["One", "Two", "Three"], title="Tides"), max_pages=2, max_chars=1000)

    assert (pdf.title, pdf.text) == ("Tides", "One\n\nTwo")


def test_first_pages_stop_after_the_page_that_passes_the_character_limit():
    pdf = pdf_first_pages(pdf_bytes(["A long first page", "Second", "Third"]), max_pages=10, max_chars=20)

    assert pdf.text == "A long first page\n\nSecond"


def test_a_broken_pdf_is_unreadable_with_the_parsers_reason():
    with pytest.raises(DocumentUnreadableError, match="Could not read this PDF") as raised:
        pdf_first_pages(b"%PDF-1.4 nothing", max_pages=1, max_chars=100)

    assert raised.value.reason


def test_a_pdf_with_a_password_is_locked():
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf_bytes(["Secret"]))))
    writer.encrypt("hunter2")
    buffer = io.BytesIO()
    writer.write(buffer)

    with pytest.raises(PdfLockedError, match="protected by a password"):
        pdf_text(buffer.getvalue())
