"""The artifact pane at the sizes it is used, in light and dark: an opened
artifact's text starts near the top, no name or line of any length widens
the page, and a 20 MB text opens on its first page and pages on as the
reader scrolls, holding a few pages at most."""

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests import waits
from tests.e2e.test_artifacts import PANE_SWAPPED_JS, SIGNAL_ARTIFACTS_CHANGED_JS, SWAPPED_WITHIN_JS
from tests.e2e.test_first_turn import sign_in

pytestmark = pytest.mark.e2e

SIZES = {"laptop": (1366, 900), "tablet": (1024, 768), "phone": (390, 844)}
# Counts the pane's swaps from the page's first load on (add_init_script).
PANE_SWAPS_COUNTED_JS = """
window.paneSwaps = 0;
document.addEventListener("htmx:afterSwap", (event) => {
  if (event.detail.target.id === "artifact-pane") window.paneSwaps += 1;
});
"""
# Nothing in the pane or the page wider than its box.
FITS_JS = """() => {
  const pane = document.getElementById("artifact-pane");
  return pane.scrollWidth <= pane.clientWidth && document.documentElement.scrollWidth <= window.innerWidth;
}"""


@pytest.fixture(scope="module")
def owner(portal):
    return portal.user_create(prefix="pane")


@pytest.fixture(scope="module")
def six(portal, owner):
    code = f"from tests.e2e.seed_pane import six_artifacts; print(six_artifacts(username={owner.username!r}))"
    return f"{portal.base_url}/c/{portal.shell(code).strip()}/"


@pytest.fixture(scope="module")
def big(portal, owner):
    code = f"from tests.e2e.seed_pane import big_text; print(big_text(username={owner.username!r}))"
    return f"{portal.base_url}/c/{portal.shell(code).strip()}/"


def _opened(page, url, *, size, scheme, portal, owner):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, portal=portal, user=owner)
    page.goto(url)
    pane = page.locator("#artifact-pane")
    if size == "phone":
        page.get_by_role("button", name="Artifacts").click()
    expect(pane).to_be_visible()
    return pane


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_an_opened_artifacts_text_starts_in_view(portal, owner, six, new_page, size, scheme, screenshot):
    page = new_page(color_scheme=scheme)
    pane = _opened(page, six, size=size, scheme=scheme, portal=portal, owner=owner)

    # Read to the end of one artifact, then choose another: it opens at its top.
    pane.evaluate("(pane) => { pane.scrollTop = pane.scrollHeight; }")
    switcher = pane.locator(".artifact-switcher")
    switcher.locator("summary").click()
    expect(switcher.locator(".artifact-list li")).to_have_count(6)
    switcher.get_by_role("link", name=re.compile("^Report 2")).click()

    first_line = pane.locator(".artifact-content p").first
    expect(first_line).to_have_text("First line of report 2.")
    expect(pane.locator(".artifact-content h1")).to_be_in_viewport(ratio=1)
    expect(first_line).to_be_in_viewport(ratio=1)
    # The switcher names the artifact once; no second heading repeats the title above its own.
    expect(pane.locator(".switcher-title")).to_have_text("Report 2")
    expect(pane.locator(".artifact-head h3")).to_have_count(0)
    screenshot(page, name="open")

    # A diff opens where the text was.
    switcher.locator("summary").click()
    switcher.get_by_role("link", name=re.compile("^Report 1")).click()
    expect(pane.locator(".switcher-title")).to_have_text("Report 1")
    pane.locator(".pane-menu summary").click()
    expect(pane.get_by_role("link", name="Export .docx")).to_be_in_viewport()
    screenshot(page, name="menu")
    pane.get_by_role("button", name="Compare", exact=True).click()
    expect(pane.locator(".diff .diff-add").first).to_be_in_viewport()
    screenshot(page, name="diff")

    # So does the editor's preview.
    pane.get_by_role("link", name="Edit").click()
    pane.get_by_label("Content of").fill("# Report 1\n\nPreviewed line.")
    pane.get_by_role("button", name="Preview").click()
    expect(pane.locator("#edit-preview p", has_text="Previewed line.")).to_be_visible()
    expect(pane.locator("#edit-preview p", has_text="Previewed line.")).to_be_in_viewport()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_no_name_or_line_of_any_length_widens_the_pane(portal, owner, six, new_page, size, scheme, screenshot):
    page = new_page(color_scheme=scheme)
    pane = _opened(page, six, size=size, scheme=scheme, portal=portal, owner=owner)

    switcher = pane.locator(".artifact-switcher")
    switcher.locator("summary").click()
    # The list shows the 300-character name and the base64 preview, inside the pane.
    expect(switcher.locator(".artifact-list")).to_contain_text("measurements_xxxx")
    page.wait_for_function(FITS_JS)
    screenshot(page, name="list")
    switcher.get_by_role("link", name=re.compile("^measurements_")).click()
    expect(pane.locator(".artifact-content")).to_contain_text("First line of the long-named file.")
    page.wait_for_function(FITS_JS)
    screenshot(page, name="long")

    switcher.locator("summary").click()
    switcher.get_by_role("link", name=re.compile("^encoded.txt")).click()
    expect(pane.locator(".switcher-title")).to_have_text("encoded.txt")
    page.wait_for_function(FITS_JS)
    screenshot(page, name="base64")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_a_20_mb_text_opens_on_its_first_page_and_pages_on(portal, owner, big, new_page, size, scheme, screenshot):
    page = new_page(color_scheme=scheme)
    pane = _opened(page, big + "?artifact=big.txt", size=size, scheme=scheme, portal=portal, owner=owner)

    content = pane.locator(".artifact-content")
    expect(content).to_contain_text("Line 0000000: solid-state batteries")
    more = pane.locator(".show-more")
    expect(more).to_have_count(1)
    expect(more).to_contain_text("characters shown")
    shown = content.inner_text()
    last = re.findall(r"Line (\d{7})", shown)[-1]
    following = f"Line {int(last) + 1:07d}:"
    expect(content).not_to_contain_text(following)

    more.get_by_role("button", name="Show more").click()
    expect(content).to_contain_text(following)
    # The next page came in place of the button, with a button for the one after it
    # (which loads a third by itself when it is in view, as on a tablet it may be).
    expect(pane.locator(".show-more")).to_have_count(1)
    expect(content.locator(".prose-text").nth(1)).to_be_attached()
    # A refresh of the pane (a change signal) keeps the pages shown (and a
    # third, if the new button was in view: it loads as it is seen).
    page.evaluate(PANE_SWAPPED_JS)
    page.evaluate(SIGNAL_ARTIFACTS_CHANGED_JS)
    assert page.evaluate(SWAPPED_WITHIN_JS, waits.ms(10))
    expect(content.locator(".prose-text").nth(1)).to_be_attached()
    expect(content).to_contain_text(following)
    page.wait_for_function(FITS_JS)
    screenshot(page, name="big")


def test_a_change_signalled_while_a_page_comes_in_refreshes_the_pane_once_it_has(portal, owner, big, new_page):
    page = new_page()
    page.add_init_script(PANE_SWAPS_COUNTED_JS)
    pane = _opened(page, big + "?artifact=big.txt", size="laptop", scheme="light", portal=portal, owner=owner)
    # The refresh the page's socket asks for as it opens is done.
    page.wait_for_function("() => window.paneSwaps >= 1")
    next_page = re.compile(r"/big\.txt/page/\?")
    held = []
    # The next page is held on its way, as a slow connection would hold it.
    page.route(next_page, lambda route: held.append(route))
    refreshes = []
    page.on(
        "request",
        lambda request: refreshes.append(request.url) if re.search(r"/big\.txt/(\?|$)", request.url) else None,
    )
    button = pane.locator(".show-more").get_by_role("button", name="Show more")
    with page.expect_request(next_page):
        button.click()
    expect(button).to_have_class(re.compile(r"\bhtmx-request\b"))

    # A turn saved a version meanwhile: the pane yields to the page on its way, and owes the refresh.
    page.evaluate(PANE_SWAPPED_JS)
    page.evaluate(SIGNAL_ARTIFACTS_CHANGED_JS)
    held[0].continue_()
    page.unroute(next_page)

    swapped = page.evaluate(SWAPPED_WITHIN_JS, waits.ms(10))
    assert swapped and len(refreshes) == 1, refreshes
    expect(pane.locator(".artifact-content .prose-text").nth(1)).to_be_attached()


def _line_numbers(content) -> list[int]:
    return [int(number) for number in re.findall(r"Line (\d{7})", content.inner_text())]


@pytest.mark.parametrize("size", list(SIZES))
def test_a_long_text_pages_in_as_the_reader_scrolls_and_holds_a_few_pages_at_most(
    portal, owner, big, new_page, size, screenshot
):
    page = new_page(color_scheme="dark" if size == "phone" else "light")
    pane = _opened(page, big + "?artifact=big.txt", size=size, scheme="light", portal=portal, owner=owner)
    content = pane.locator(".artifact-content")
    pages, below, above = (
        content.locator(".artifact-page"),
        content.locator(".show-more, .show-later"),
        content.locator(".show-earlier"),
    )
    expect(pages).to_have_count(1)

    # Scrolled down through eight pages, with no click: the first ones are let go of.
    for shown in range(2, 9):
        last = _line_numbers(content)[-1]
        below.scroll_into_view_if_needed()
        expect(content).to_contain_text(f"Line {last + 1:07d}:")
        expect(pages).to_have_count(min(shown, 5))
    expect(content).not_to_contain_text("Line 0000000:")
    expect(above).to_have_count(1)
    lines = _line_numbers(content)
    # What is held is the last five pages, whole and in order.
    assert lines == list(range(lines[0], lines[-1] + 1)) and len(lines) < 5 * 300
    screenshot(page, name="scrolled")

    # Scrolled back to the top: the pages come back, and the last ones go.
    height = page.viewport_size["height"]
    while above.count():
        first, line = pages.first.element_handle(), _line_numbers(content)[0]
        above.scroll_into_view_if_needed()
        expect(content).to_contain_text(f"Line {line - 1:07d}:")
        expect(pages).to_have_count(5)
        # The page read stays in view: the one that came in is above it, not in its place.
        assert 0 <= first.bounding_box()["y"] < height and pages.first.bounding_box()["y"] < 0
    expect(content).to_contain_text("Line 0000000:")
    lines = _line_numbers(content)
    assert lines == list(range(lines[-1] + 1))
    # Down again from there, the way on is there.
    below.scroll_into_view_if_needed()
    expect(content).to_contain_text(f"Line {lines[-1] + 1:07d}:")
    page.wait_for_function(FITS_JS)


@pytest.mark.parametrize("size", list(SIZES))
def test_no_word_of_any_length_widens_the_thread_or_the_list(portal, owner, new_page, size, screenshot):
    code = f"from tests.e2e.seed_pane import long_words; print(long_words(username={owner.username!r}))"
    url = f"{portal.base_url}/c/{portal.shell(code).strip()}/"
    page = new_page()
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, portal=portal, user=owner)
    page.goto(url)

    expect(page.locator("article.turn .answer")).to_contain_text("It means www")
    if size != "laptop":
        page.locator(".drawer-toggle").click()
    expect(page.locator("#conversation-list")).to_contain_text("title_www")
    page.wait_for_function(
        """() => [document.getElementById("thread"), document.getElementById("conversation-list")].every(
             (box) => box.scrollWidth <= box.clientWidth) && document.documentElement.scrollWidth <= window.innerWidth"""
    )
    screenshot(page, name="words")


def test_an_upload_shows_its_progress_and_clears_an_earlier_refusal(portal, owner, page):
    # A conversation of its own: the upload adds to its list.
    code = f"from tests.e2e.seed_pane import big_text; print(big_text(username={owner.username!r}, size=1000))"
    sign_in(page, portal=portal, user=owner)
    url = f"{portal.base_url}/c/{portal.shell(code).strip()}/"
    # Once its websocket opens, the page refreshes the pane, and the refresh's morph puts back the limit
    # the server set: the test's limit is set once that refresh is in (htmx swaps before it drops the class).
    with page.expect_response(lambda r: r.request.method == "GET" and urlsplit(r.url).path.endswith("/artifacts/")):
        page.goto(url)
    pane = page.locator("#artifact-pane")
    expect(pane).not_to_have_class(re.compile(r"\bhtmx-request\b"))
    error, bar = pane.locator("#upload-error"), pane.locator("progress.upload-bytes")
    notes = {"name": "progress.md", "mimeType": "text/markdown", "buffer": "# 进度\n\n上传的笔记。".encode()}

    # Refused in the browser (as a file over the limit would be).
    page.evaluate("() => { document.getElementById('artifact-file').dataset.maxBytes = '4'; }")
    page.set_input_files("#artifact-file", files=[notes])
    expect(page.locator("#artifact-file")).to_have_attribute("data-max-bytes", "4")
    pane.get_by_role("button", name="Upload", exact=True).click()
    expect(error).to_be_visible()
    expect(bar).to_be_hidden()

    # Another file chosen: the refusal goes; sent, the bar shows until the pane answers.
    page.evaluate("() => { document.getElementById('artifact-file').dataset.maxBytes = '1000000'; }")
    page.set_input_files("#artifact-file", files=[notes])
    expect(error).to_be_hidden()
    held = []
    page.route(
        re.compile(r"/artifacts/$"),
        lambda route: held.append(route) if route.request.method == "POST" else route.continue_(),
    )
    pane.get_by_role("button", name="Upload", exact=True).click()
    expect(bar).to_be_visible()
    while not held:
        page.wait_for_timeout(50)
    held[0].continue_()
    expect(pane.locator(".switcher-title")).to_have_text("progress.md")
    expect(pane.locator(".artifact-content h1")).to_have_text("进度")
    expect(bar).to_be_hidden()
    expect(error).to_be_hidden()
