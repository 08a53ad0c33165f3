"""The team library in the browser: a user who is not staff adds a document,
finds it (in Chinese and English), reads it, sees an answer's Activity cite
it and open it at the passage the search found, follows an answer's link to
a numbered passage (library://<id>#<n>), and removes it; a .zip of
documents is read by the worker while the list follows, one failing with
why, read again on request."""

import io
import re
import secrets
import zipfile

import pytest
from playwright.sync_api import expect

from tests.agents.test_engine import call
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

# The session's portal is shared: other tests (test_chinese) add heat pump handbooks of their own.
TITLE = f"热泵手册 {secrets.token_hex(3)}"
DOCUMENT = (
    "# 热泵手册\n\n"
    + "".join(
        f"## 第 {n} 节\n\n空气源热泵把室外空气中的热量搬进室内，第 {n} 节讲安装与维护。\n\n" for n in range(1, 13)
    )
    + "## 效率\n\n热泵的效率用COP衡量，寒冷地区的**除霜**会降低效率。The defrost cycle lowers efficiency.\n\n"
    + "".join(f"## 附录 {n}\n\n附录讲的是风管和噪音。\n\n" for n in range(1, 8))
)
# Each section is a passage of its own (library.passages): 效率 is the 13th of 20.
EFFICIENCY, PASSAGES = 13, 20


def _library(page):
    page.locator(".topbar").get_by_role("link", name="Library", exact=True).click()
    expect(page.locator("main h1")).to_have_text("Library")


def _search(page, query):
    page.get_by_label("Search the library").fill(query)
    page.get_by_label("Search the library").press("Enter")
    expect(page.get_by_label("Search the library")).to_have_value(query)


def test_a_user_adds_finds_reads_cites_and_removes_a_library_document(portal, model_server, new_page, screenshot):
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=portal.users[0])
    _library(page)

    page.get_by_label("Files").set_input_files(
        files=[{"name": "heat-pumps.md", "mimeType": "text/markdown", "buffer": DOCUMENT.encode()}]
    )
    page.get_by_label("Title").fill(TITLE)
    page.get_by_role("button", name="Add to the library").click()
    expect(page.locator("main h1").first).to_have_text(TITLE)
    expect(page.locator("article h2", has_text="效率")).to_be_visible()
    document_path = re.search(r"/library/\d+/$", page.url)[0]

    _library(page)
    _search(page, "热泵的效率")
    item = page.locator(".library-item", has_text=TITLE)
    expect(item).to_have_count(1)
    expect(item.locator(".library-title")).to_have_text(TITLE)
    expect(item.locator("mark", has_text="效率").first).to_be_visible()
    _search(page, "defrost cycle")
    expect(item).to_have_count(1)
    item.locator(".library-title").click()
    passage = page.locator("mark#passage")
    expect(passage).to_be_in_viewport()
    assert "defrost cycle" in "".join(page.locator("article mark").all_text_contents())

    # An answer whose search agent found the document in the library.
    model_server.add(
        Text(call("call_subagent", agent="search_agent", instruction="找热泵效率的资料")),
        Text(call("web_search", query="热泵的效率")),
        Text("资料库里有一份热泵手册。"),
        Text(
            f"热泵的效率用COP衡量，见[{TITLE}](library://{document_path.split('/')[2]})"
            f"的[效率一节](library://{document_path.split('/')[2]}#{EFFICIENCY})。"
        ),
    )
    page.goto(f"{portal.base_url}/")
    ask(page, question="热泵的效率如何？")
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turn.locator(".answer a", has_text=TITLE)).to_have_attribute("href", document_path)
    turn.locator(".activity-log summary").click()
    # The hit names the section its passage is in.
    hit = turn.locator(".step-sources li").filter(has=page.locator(".source-section", has_text="热泵手册 › 效率"))
    source = hit.locator("a", has_text=TITLE)
    hit.scroll_into_view_if_needed()
    screenshot(page, name="1366-light-activity", full_page=False)
    expect(source).to_have_attribute("rel", "noopener noreferrer nofollow")
    with page.expect_popup() as opened:
        source.click()
    cited = opened.value
    expect(cited.locator("main h1").first).to_have_text(TITLE)
    expect(cited.locator("mark#passage")).to_be_in_viewport()
    assert "热泵的效率" in "".join(cited.locator("article mark").all_text_contents())
    cited.close()

    # The answer's link to a numbered passage opens the document there.
    turn.locator(".answer a", has_text="效率一节").click()
    expect(page.locator(".library-passage")).to_have_text(f"Passage {EFFICIENCY} of {PASSAGES} · 热泵手册 › 效率")
    expect(page.locator("mark#passage")).to_be_in_viewport()
    assert "COP衡量" in "".join(page.locator("article mark").all_text_contents())
    for width, height, scheme in ((1366, 900, "light"), (390, 844, "dark")):
        page.set_viewport_size({"width": width, "height": height})
        page.emulate_media(color_scheme=scheme)
        page.locator("mark#passage").scroll_into_view_if_needed()
        screenshot(page, name=f"{width}-{scheme}-numbered-passage", full_page=False)
        page.locator(".library-passage").scroll_into_view_if_needed()
        screenshot(page, name=f"{width}-{scheme}-numbered-passage-note", full_page=False)
    page.set_viewport_size({"width": 1366, "height": 900})

    for width, height in ((1366, 900), (390, 844)):
        for scheme in ("light", "dark"):
            shot = new_page(viewport={"width": width, "height": height}, color_scheme=scheme)
            sign_in(shot, portal=portal, user=portal.users[0])
            _library(shot)
            screenshot(shot, name=f"{width}-{scheme}-list")
            _search(shot, "热泵的效率")
            screenshot(shot, name=f"{width}-{scheme}-search")
            shot.locator(".library-title", has_text=TITLE).click()
            expect(shot.locator("mark#passage")).to_be_in_viewport()
            # The window as the reader sees it, scrolled to the passage, not the whole page.
            shot.screenshot(path=screenshot(shot, name=f"{width}-{scheme}-passage"))
            shot.goto(f"{portal.base_url}{document_path}")
            screenshot(shot, name=f"{width}-{scheme}-document")

    page.goto(f"{portal.base_url}{document_path}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove").click()
    expect(page).to_have_url(f"{portal.base_url}/library/")
    expect(page.locator(".library-items")).not_to_contain_text(TITLE)
    assert page.request.get(f"{portal.base_url}{document_path}").status == 404


def test_a_zip_of_documents_is_read_by_the_worker_while_the_list_follows(portal, new_page, screenshot):
    user = portal.user_create(prefix="e2e-bulk")
    # The session's portal is shared: other tests' documents are listed too.
    tag = secrets.token_hex(3)
    notes, tides, scan = f"热泵笔记-{tag}.md", f"tides-{tag}.md", f"scan-{tag}.pdf"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"团队资料/{notes}", "# 热泵笔记\n\n寒冷地区的热泵效率会下降，需要定期除霜。")
        archive.writestr(tides, "# Tides\n\nThe North Sea has a semi-diurnal tide.")
        archive.writestr(scan, b"%PDF-1.7 no pages here")
        archive.writestr("photo.png", b"\x89PNG\r\n\x1a\n")
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=user)
    _library(page)

    page.get_by_label("Files").set_input_files(
        files=[{"name": "资料.zip", "mimeType": "application/zip", "buffer": buffer.getvalue()}]
    )
    page.get_by_role("button", name="Add to the library").click()
    expect(page.locator(".notice").first).to_have_text("3 documents are being read; they are listed below.")
    expect(page.locator(".library-skipped")).to_contain_text("photo.png")
    items = page.locator("#library-items")
    # The worker reads them while the page is open; the list follows without a reload.
    for title in (notes, tides):
        expect(items.locator("li[data-status='indexed']", has_text=title)).to_have_count(1, timeout=TURN_TIMEOUT)
    failed = items.locator("li[data-status='failed']", has_text=scan)
    expect(failed).to_have_count(1)
    expect(failed.locator(".library-failed")).to_contain_text("Could not read")
    screenshot(page, name="1366-light-read")

    # Found by its text, which the worker read.
    _search(page, "定期除霜")
    expect(page.locator(".library-item .library-title", has_text=notes)).to_have_count(1)
    page.goto(f"{portal.base_url}/library/")
    page.locator("li[data-status='failed']", has_text=scan).get_by_role("button", name="Read it again").click()
    # Queued again, then failed again: the file is no better.
    expect(page.locator("li[data-status='queued'], li[data-status='failed']").filter(has_text=scan)).to_have_count(1)
    expect(page.locator("li[data-status='failed']", has_text=scan)).to_have_count(1, timeout=TURN_TIMEOUT)

    for width, height, scheme in ((390, 844, "dark"), (1024, 800, "light")):
        shot = new_page(viewport={"width": width, "height": height}, color_scheme=scheme, locale="zh-CN")
        sign_in(shot, portal=portal, user=user)
        shot.goto(f"{portal.base_url}/library/")
        expect(shot.locator("li[data-status='failed']", has_text=scan).locator(".library-badge")).to_have_text("失败")
        screenshot(shot, name=f"{width}-{scheme}-zh-statuses")
