"""The offline demo model in the browser: no API key, the sample library,
what a newcomer's first page offers from it, and a first question comparing
two things; a text file in the library and the pane, a report's sources, a
question naming an upload and the zip that gives the uploads back."""

import io
import re
import zipfile
from urllib.parse import urlsplit

import docx
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import portal_running
from tests.e2e.test_export import _download
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.e2e.test_layout import sizes_schemes_languages

pytestmark = pytest.mark.e2e

QUESTION = "Compare heat pumps and solid-state batteries for our lab's energy plan: which should we fund first?"

# The URL a permission prompt asks to read, once it is one not yet approved.
NEW_PROMPT_JS = """(approved) => {
  const value = document.querySelector("button[value=approve]")?.closest("form")?.querySelector(".param-value");
  const url = value ? value.textContent.trim() : "";
  return url && !approved.includes(url) ? url : false;
}"""


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory):
    """A portal of this module's own with no API key, so the demo model answers, and the sample library."""
    with portal_running(
        template=portal_template,
        data_dir=tmp_path_factory.mktemp("portal-demo"),
        extra_env={"OPENAI_API_KEY": "", "ARTIFACTFLOW_DEMO_WORD_DELAY": "0"},
    ) as running:
        running.shell("from django.core.management import call_command; call_command('library_samples', verbosity=0)")
        yield running


def test_a_comparison_reads_both_documents_and_shows_them_side_by_side(portal, new_page, screenshot):
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=portal.users[0])

    ask(page, question=QUESTION)

    # One document read for each topic, each asked for in turn.
    approved = []
    while len(approved) < 2:
        url = page.wait_for_function(NEW_PROMPT_JS, arg=approved, timeout=TURN_TIMEOUT).json_value()
        page.get_by_role("button", name="Approve", exact=True).click()
        approved.append(url)
    assert all(url.startswith("library://") for url in approved) and len(set(approved)) == 2
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turn).to_contain_text("offline demo model")
    expect(turn.get_by_role("link", name="Solid-state batteries")).to_be_visible()
    table = page.locator("#artifact-pane .artifact-content table").first
    expect(table.locator("thead")).to_contain_text("heat pumps")
    expect(table.locator("thead")).to_contain_text("solid-state batteries")
    expect(table.get_by_role("link", name="Heat pumps")).to_be_visible()
    expect(table.get_by_role("link", name="Solid-state batteries")).to_be_visible()
    expect(table).to_contain_text("400–500 Wh/kg")
    table.scroll_into_view_if_needed()
    screenshot(page, name="comparison")


NOTE_TITLE = "热泵测试纪要.txt"
# A text file: one long paragraph (no spaces for a browser to break at), a line break kept, a second paragraph.
NOTE = (
    "寒冷地区热泵效率测试纪要："
    + "空气源热泵在零下十度的测试中仍能稳定供暖，能效比保持在二以上，除霜周期约四十分钟一次，" * 6
    + "\n会后整理。\n\n第二段：下周复测地源热泵。"
)
MEETING_NOTES = "周一例会：" + "讨论了实验室的电费和冰箱的耗电，" * 8
# Truthy once the last turn is completed ("done"), or the URL of a permission prompt not yet approved.
PROMPT_OR_DONE_JS = """(approved) => {
  const turns = document.querySelectorAll("article.turn");
  if (turns.length && turns[turns.length - 1].dataset.status === "completed") return "done";
  const value = document.querySelector("button[value=approve]")?.closest("form")?.querySelector(".param-value");
  const url = value ? value.textContent.trim() : "";
  return url && !approved.includes(url) ? url : false;
}"""
# Whether the element's text fits its width: nothing runs off the right edge.
FITS_JS = "element => element.scrollWidth <= element.clientWidth + 1"


def _approve_until_done(page) -> list[str]:
    approved = []
    while (
        state := page.wait_for_function(PROMPT_OR_DONE_JS, arg=approved, timeout=TURN_TIMEOUT).json_value()
    ) != "done":
        page.locator("form.permission button[value=approve]").click()
        approved.append(state)
    return approved


def _word_document() -> bytes:
    document = docx.Document()
    document.add_heading("热泵测试计划", level=1)
    document.add_paragraph("测试在零下十度进行。每台热泵运行两周。")
    data = io.BytesIO()
    document.save(data)
    return data.getvalue()


def _pane_shown(page, *, width: int):
    if width < 600:
        page.locator(".pane-toggle").click()
    return page.locator("#artifact-pane")


def test_text_wraps_library_sources_link_a_named_upload_is_read_and_the_zip_gives_the_uploads_back(
    portal, new_page, screenshot
):
    user = portal.user_create(prefix="e2e-library")
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=user)

    # A text file added to the library reads as wrapping paragraphs, with no Copy code button.
    page.goto(f"{portal.base_url}/library/")
    page.get_by_label("Files").set_input_files(
        files=[{"name": NOTE_TITLE, "mimeType": "text/plain", "buffer": NOTE.encode()}]
    )
    page.get_by_role("button", name="Add to the library").click()
    expect(page.locator("main h1").first).to_have_text(NOTE_TITLE)
    document_path = urlsplit(page.url).path
    article = page.locator("article.library-text")
    expect(article.locator("p")).to_have_count(2)
    expect(article.locator("button.copy-code, pre")).to_have_count(0)
    assert article.evaluate(FITS_JS)

    # The demo's report quotes the library: each source's library:// URL is a link to its page.
    page.goto(f"{portal.base_url}/")
    ask(page, question="寒冷地区热泵的效率怎么样？")
    assert all(url.startswith("library://") for url in _approve_until_done(page))
    conversation_path = urlsplit(page.url).path
    page.goto(f"{portal.base_url}{conversation_path}?artifact=research_report")
    pane = page.locator("#artifact-pane")
    sources = pane.locator(".artifact-content a", has_text=re.compile(r"^library://\d+$"))
    expect(sources.first).to_be_visible()
    number = sources.first.text_content().removeprefix("library://")
    expect(sources.first).to_have_attribute("href", f"/library/{number}/")
    sources.first.click()
    expect(page).to_have_url(re.compile(rf"/library/{number}/$"))
    expect(page.locator("article.library-text")).not_to_be_empty()

    # Two uploads, the Word document first; the question names it, so it is read, not the newer notes.
    page.goto(f"{portal.base_url}{conversation_path}")
    word = _word_document()
    for name, data, shows in (
        ("test_plan_热泵.docx", word, "测试在零下十度进行"),
        ("meeting_notes.txt", MEETING_NOTES.encode(), "周一例会"),
    ):
        page.set_input_files("#artifact-file", files=[{"name": name, "mimeType": "", "buffer": data}])
        page.get_by_role("button", name="Upload", exact=True).click()
        expect(pane.locator(".artifact-content")).to_contain_text(shows)
    notes = pane.locator(".artifact-content")
    expect(notes.locator(".plain-lines p")).to_have_count(1)
    expect(notes.locator("button.copy-code, pre")).to_have_count(0)
    assert notes.evaluate(FITS_JS)
    page.locator("#composer-input").fill("总结 test_plan_热泵.docx 这个文件")
    page.get_by_role("button", name="Send", exact=True).click()
    second = page.locator("article.turn").nth(1)
    expect(second).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(second.locator(".answer")).to_contain_text("已读取上传的文件 test_plan_热泵.docx")
    expect(second.locator(".answer")).not_to_contain_text("meeting_notes")

    # The zip gives the uploads back as uploaded.
    name, archive = _download(page, "With artifacts (.zip)")
    with zipfile.ZipFile(io.BytesIO(archive)) as files:
        assert name.endswith(".zip")
        assert files.read("uploads/test_plan_热泵.docx") == word
        assert files.read("uploads/meeting_notes.txt").decode() == MEETING_NOTES
        assert "测试在零下十度进行" in files.read("artifacts/test_plan_热泵.docx.md").decode()

    # Each width and scheme, in English and Chinese: the text wraps, the sources are links.
    for language in ("en", "zh-hans"):
        page.locator("#language-select").select_option(language)
        expect(page.locator("html")).to_have_attribute("lang", language)
        for width, height in ((1366, 900), (1024, 768), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                shot = f"{language}-{width}-{scheme}"
                page.goto(f"{portal.base_url}{document_path}")
                assert page.locator("article.library-text").evaluate(FITS_JS), shot
                screenshot(page, name=f"{shot}-library-text")
                page.goto(f"{portal.base_url}{conversation_path}?artifact=meeting_notes.txt")
                notes = _pane_shown(page, width=width).locator(".artifact-content")
                expect(notes.locator(".plain-lines p")).to_have_count(1)
                assert notes.evaluate(FITS_JS), shot
                screenshot(page, name=f"{shot}-pane-text", full_page=False)
                page.goto(f"{portal.base_url}{conversation_path}?artifact=research_report")
                source = _pane_shown(page, width=width).locator(".artifact-content a", has_text="library://").first
                source.scroll_into_view_if_needed()
                expect(source).to_be_visible()
                screenshot(page, name=f"{shot}-report-source", full_page=False)


# What a new conversation offers from the sample library (eight documents, four in each language;
# this module's other tests may add to it, so the count is any).
EXAMPLES = {
    "en": {
        "more": re.compile(r"and \d+ more\."),
        "titles": ["Heat pumps", "Retrieval-augmented generation (RAG)", "Solid-state batteries"],
        "question": "What does our library say about {}?",
    },
    "zh-hans": {
        "more": re.compile(r"，以及另外 \d+ 篇。"),
        "titles": [
            "空气源热泵在寒冷地区的性能（COP 与除霜）",
            "分布式光伏：屋顶电站的发电量与并网方式",
            "家用储能电池：容量、寿命与 LFP 电芯",
        ],
        "question": "我们的资料库关于{}说了什么？",
    },
}


def test_a_new_conversation_offers_the_library_in_the_readers_language_and_counts_the_rest(
    portal, new_page, screenshot
):
    page = new_page()
    sign_in(page, portal=portal, user=portal.user_create(prefix="e2e-newcomer"))
    empty = page.locator(".empty-state")

    for size, scheme, language in sizes_schemes_languages(page):
        where = f"{size}-{scheme}-{language}"
        expected = EXAMPLES[language]
        expect(empty.locator("p.muted")).to_contain_text(expected["more"])
        expect(empty.locator("p.muted strong")).to_have_count(6)
        expect(empty.locator(".examples button")).to_have_text(
            [expected["question"].format(title) for title in expected["titles"]]
        )
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), where
        screenshot(page, name=where)
