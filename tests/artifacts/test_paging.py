import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from artifacts.paging import PAGE_CHARS, page_of, text_first_page, version_page
from tests.artifacts.test_views import HTMX, _flushed, _url
from tests.factories import ConversationFactory, pdf_bytes

pytestmark = pytest.mark.django_db


def test_a_short_text_is_one_page():
    page = text_first_page(text="# Notes\n\nshort")

    assert (page.text, page.start, page.end, page.more) == ("# Notes\n\nshort", 0, 14, False)


def test_a_page_ends_at_a_lines_end_in_its_second_half():
    text = "a" * 70 + "\n" + "b" * 50 + "\n" + "c" * 100

    page = text_first_page(text=text, size=100)

    assert page.text == "a" * 70 + "\n" and page.end == 71 and page.more


def test_a_page_ends_between_paragraphs_where_one_ends_in_its_second_half():
    text = "a" * 60 + "\n\n" + "b" * 20 + "\n" + "c" * 10 + "\n" + "d" * 100

    page = text_first_page(text=text, size=100)

    assert page.text == "a" * 60 + "\n\n" and page.more


def test_a_page_never_ends_inside_a_fenced_code_block():
    # A paragraph, then code with blank lines in it running past the page's size.
    code = "```python\n" + "x = 1\n\n" * 20 + "```\n"
    text = "intro " * 10 + "\n\n" + "p" * 10 + "\n\n" + code + "\nafter\n\n" + "z" * 200

    first = text_first_page(text=text, size=140)
    second = page_of(part=text[first.end :], start=first.end, total=len(text), size=200)

    # Cut before the fence opens, in the paragraph break before it; the code stays whole on the next page.
    assert first.text.endswith("p" * 10 + "\n\n") and second.text.startswith(code)


def test_a_page_with_no_line_end_near_its_end_is_cut_at_its_size():
    text = "x" * 30 + "\n" + "y" * 300

    page = page_of(part=text[40:140], start=40, total=len(text), size=100)

    assert (page.start, page.end, page.text) == (40, 140, "y" * 100)


def test_pages_of_a_saved_version_read_back_the_whole_text(conversation):
    text = "".join(f"line {n}\n" for n in range(20_000))
    _flushed(conversation, "long.md", text)
    artifact = conversation.artifact_session.artifacts.get(artifact_id="long.md")

    pages, start = [], 0
    while True:
        page = version_page(artifact=artifact, version=1, start=start, size=10_000)
        pages.append(page.text)
        if not page.more:
            break
        assert page.text.endswith("\n") and len(page.text) <= 10_000
        start = page.end

    assert "".join(pages) == text and len(pages) > 10


def test_chinese_text_is_paged_by_character_never_inside_one(conversation):
    # No line breaks: pages are cut at their size, in characters, each a whole one.
    text = "研究报告显示热泵效率很高" * 2_000
    _flushed(conversation, "报告.md", text)
    artifact = conversation.artifact_session.artifacts.get(artifact_id="报告.md")

    first = version_page(artifact=artifact, version=1, start=0, size=1_001)
    second = version_page(artifact=artifact, version=1, start=first.end, size=1_001)

    assert first.text == text[:1_001] and second.text == text[1_001:2_002]
    assert (first.text + second.text).encode("utf-8").decode("utf-8") == text[:2_002]


def test_a_page_past_the_end_or_of_no_version_is_none(conversation):
    _flushed(conversation, "notes.md", "short")
    artifact = conversation.artifact_session.artifacts.get(artifact_id="notes.md")

    assert version_page(artifact=artifact, version=1, start=6) is None
    assert version_page(artifact=artifact, version=9, start=0) is None
    assert version_page(artifact=artifact, version=1, start=2**40) is None


def test_the_pane_shows_a_long_texts_first_page_and_show_more_fetches_the_next(signed_in, conversation):
    text = "".join(f"第{n}行 line {n}\n" for n in range(60_000))
    assert len(text) > 3 * PAGE_CHARS
    _flushed(conversation, "long.md", text, content_type="text/plain")

    pane = signed_in.get(_url("artifact-detail", conversation, "long.md"), **HTMX).content.decode()

    assert len(pane) < PAGE_CHARS * 1.5
    assert "第0行 line 0" in pane and "第59999行" not in pane
    assert "Show more" in pane and 'id="artifact-source"' not in pane
    first_end = len(text_first_page(text=text).text)
    assert f"start={first_end}" in pane

    more = signed_in.get(
        _url("artifact-page", conversation, "long.md") + f"?version=1&start={first_end}", **HTMX
    ).content.decode()

    next_line = text[first_end:].split("\n", 1)[0]
    # The page alone, its text first, then the way to the one after it.
    assert "<html" not in more and 'id="artifact-pane"' not in more and "第0行 line 0" not in more
    assert more.index(next_line) < more.index("Show more")


def test_a_version_asked_for_with_no_start_is_its_first_page(signed_in, conversation):
    text = "".join(f"第{n}行 line {n}\n" for n in range(60_000))
    _flushed(conversation, "long.md", text, content_type="text/plain")

    page = signed_in.get(_url("artifact-page", conversation, "long.md") + "?version=1", **HTMX)

    assert page.status_code == 200
    html = page.content.decode()
    assert "第0行 line 0" in html and f"start={len(text_first_page(text=text).text)}" in html


def test_a_page_that_is_not_there_is_a_404(signed_in, conversation):
    _flushed(conversation, "notes.md", "short")

    for query in ("?version=1&start=99", "?version=2&start=0", "?start=0", "?version=1&start=-1", "?version=1&start="):
        assert signed_in.get(_url("artifact-page", conversation, "notes.md") + query).status_code == 404


def test_a_pdfs_and_a_text_files_text_read_as_wrapped_paragraphs_not_monospace(signed_in, conversation):
    url = _url("artifact-pane", conversation)
    pdf = signed_in.post(url, {"file": SimpleUploadedFile("paper.pdf", pdf_bytes(["Page one", "Page two"]))}, **HTMX)
    notes = signed_in.post(url, {"file": SimpleUploadedFile("notes.txt", b"Page one\n\nPage two")}, **HTMX)

    pdf_html, notes_html = pdf.content.decode(), notes.content.decode()
    assert '<div class="prose-text"><p>Page one</p><p>Page two</p></div>' in pdf_html
    # A text file's paragraphs wrap too, keeping its own line breaks (no <pre>, which runs off the edge).
    assert '<div class="prose-text plain-lines"><p>Page one</p><p>Page two</p></div>' in notes_html
    assert "<pre" not in notes_html


def test_the_page_of_a_5_mb_report_sends_its_first_page_as_the_page_of_a_2_kb_one_does(signed_in, user):
    section = "## 第{n}节 Section {n}\n\nHeat pumps keep a **useful** coefficient of performance.\n\n- 要点 {n}\n\n"
    sizes = {}
    for label, count in (("small", 20), ("big", 55_000)):
        conversation = ConversationFactory(owner=user)
        report = "".join(section.format(n=n) for n in range(count))
        _flushed(conversation, "report.md", report)
        page = signed_in.get(reverse("conversation-detail", args=[conversation.pk]) + "?artifact=report.md")
        html = page.content.decode()
        assert page.status_code == 200 and "第0节 Section 0" in html
        sizes[label] = len(page.content)

    assert len(report.encode()) > 5 * 1024 * 1024
    # The big report's first page and its way on, and nothing more of it.
    assert "第54999节" not in html and 'hx-trigger="click, intersect once"' in html
    assert sizes["big"] - sizes["small"] < PAGE_CHARS * 1.5
