"""The page a team lives in, at the sizes it is used: a thread of 45 turns
on a laptop, a tablet and a phone, in light and dark."""

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in

pytestmark = pytest.mark.e2e

TURNS = 45
SIZES = {"laptop": (1366, 900), "tablet": (1024, 768), "phone": (390, 844)}
SCHEMES = ("light", "dark")
LANGUAGES = ("en", "zh-hans")


def sizes_schemes_languages(page):
    """Brings one page through every size, colour scheme and language (the
    language chosen in the bar's menu, as a person does: their lasting choice,
    so give the test a user of its own) and yields (size, scheme, language) at each."""
    for language in LANGUAGES:
        if page.locator("html").get_attribute("lang") != language:
            page.set_viewport_size(dict(zip(("width", "height"), SIZES["laptop"], strict=True)))
            page.locator("#language-select").select_option(language)
            expect(page.locator("html")).to_have_attribute("lang", language)
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            for scheme in SCHEMES:
                page.emulate_media(color_scheme=scheme)
                yield size, scheme, language


@pytest.fixture(scope="module")
def long_thread(portal):
    code = f"from tests.e2e.seed import long_conversation; print(long_conversation(username={portal.users[0].username!r}, turns={TURNS}))"
    return f"{portal.base_url}/c/{portal.shell(code).strip()}/"


# True once the pane stands right of the thread, at least 280 px wide.
PANE_BESIDE_JS = """() => {
  const chat = document.getElementById("thread").getBoundingClientRect();
  const pane = document.getElementById("pane-frame").getBoundingClientRect();
  return pane.left >= chat.right - 1 && pane.width >= 280;
}"""
# True once the drawer has slid all the way in.
DRAWER_IN_JS = "() => document.getElementById('conversation-list').getBoundingClientRect().left === 0"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_a_long_thread_opens_at_its_newest_turn_with_the_composer_and_pane_at_hand(
    portal, long_thread, new_page, screenshot, size, scheme
):
    width, height = SIZES[size]
    page = new_page(viewport={"width": width, "height": height}, color_scheme=scheme)
    sign_in(page, portal=portal, user=portal.users[0])
    page.goto(long_thread)

    # The newest page of it (agents.thread.thread_page).
    turns = page.locator("article.turn")
    expect(turns).to_have_count(settings.THREAD_PAGE_TURNS)
    # The composer and Send are on screen without scrolling; the page itself never
    # scrolls. Waited for: the socket's first push swaps the composer's actions in
    # again as it connects, which a busy machine may still be doing.
    expect(page.locator("#composer-input")).to_be_in_viewport(ratio=1)
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_in_viewport(ratio=1)
    page.wait_for_function("() => document.scrollingElement.scrollHeight <= window.innerHeight")
    page.wait_for_function("() => document.documentElement.scrollWidth <= window.innerWidth")
    # The thread scrolls inside itself and opens at the newest turn.
    page.wait_for_function(
        "() => { const t = document.getElementById('thread'); return t.scrollHeight > t.clientHeight && t.scrollHeight - t.scrollTop - t.clientHeight < 2; }"
    )
    expect(turns.last.locator(".answer")).to_be_in_viewport()
    expect(turns.first).not_to_be_in_viewport()
    screenshot(page, name=f"{size}-{scheme}")

    pane = page.locator("#artifact-pane")
    if size == "phone":
        # The pane is a sheet over the chat, opened by its button and closed by Escape.
        expect(pane).to_be_hidden()
        toggle = page.get_by_role("button", name="Artifacts")
        toggle.click()
        expect(pane).to_be_visible()
        expect(page.locator("#pane-frame")).to_be_in_viewport(ratio=1)
        expect(pane.locator(".artifact-list")).to_contain_text("Report")
        screenshot(page, name=f"{size}-{scheme}-pane")
        page.keyboard.press("Escape")
        expect(pane).to_be_hidden()
        expect(toggle).to_be_focused()
    else:
        # Chat and pane side by side, each whole on screen.
        expect(pane).to_be_visible()
        page.wait_for_function(PANE_BESIDE_JS)
        expect(page.locator("#pane-frame")).to_be_in_viewport(ratio=1)

    list_ = page.locator("#conversation-list")
    if size == "laptop":
        expect(list_).to_be_in_viewport()
        expect(page.locator(".drawer-toggle")).to_be_hidden()
    else:
        # The conversation list is a drawer: out of sight until asked for.
        expect(list_).not_to_be_in_viewport()
        drawer = page.locator(".drawer-toggle")
        drawer.click()
        expect(list_).to_be_in_viewport()
        page.wait_for_function(DRAWER_IN_JS)  # the slide's end, for the picture
        expect(list_.get_by_role("link", name="+ New conversation")).to_be_focused()
        screenshot(page, name=f"{size}-{scheme}-drawer")
        page.keyboard.press("Escape")
        expect(list_).not_to_be_in_viewport()
        expect(drawer).to_be_focused()


def test_a_new_conversation_focuses_the_composer_and_offers_a_skip_link(portal, page):
    sign_in(page, portal=portal, user=portal.users[0])
    page.goto(f"{portal.base_url}/")
    expect(page.locator("#composer-input")).to_be_focused()
    expect(page.locator(".empty-state")).to_contain_text("What should the agents research?")

    skip = page.get_by_role("link", name="Skip to content")
    skip.focus()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    # A second one goes past the list and the thread into the box (keys.js).
    skip = page.get_by_role("link", name="Skip to the message box")
    skip.focus()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#composer-input")).to_be_focused()


def test_rename_and_edit_open_on_their_field_and_escape_folds_them(portal, long_thread, page):
    sign_in(page, portal=portal, user=portal.users[0])
    page.goto(long_thread)
    page.locator("details.head-menu > summary").click()
    for fold, field in (("details.rename", "#rename-title"), ("article.turn:last-of-type details.edit", "textarea")):
        summary = page.locator(f"{fold} summary")
        summary.click()
        expect(page.locator(f"{fold} {field}")).to_be_focused()
        page.keyboard.press("Escape")
        expect(page.locator(fold)).not_to_have_attribute("open", "")
        expect(summary).to_be_focused()


# True when some element of the bar shows exactly `name`, drawn whole (not cut short) and inside the window.
NAME_WHOLE_JS = """(name) => [...document.querySelectorAll(".topbar *")].some((element) => {
  if (element.textContent.trim() !== name || !element.checkVisibility() || element.clientWidth < 2) return false;
  const box = element.getBoundingClientRect();
  return element.scrollWidth <= element.clientWidth && box.left >= 0 && box.right <= window.innerWidth;
})"""


# How many lines an element's text takes.
LINES_JS = "(element) => { const range = document.createRange(); range.selectNodeContents(element); return range.getClientRects().length; }"


def test_the_signed_in_name_reads_whole_at_every_size_scheme_and_language(portal, new_page, screenshot):
    user = portal.user_create(prefix="dana.kowalski")
    page = new_page()
    sign_in(page, portal=portal, user=user)
    menu = page.locator(".user-menu")
    avatar = menu.locator(".avatar")

    for size, scheme, language in sizes_schemes_languages(page):
        where = f"{size}-{scheme}-{language}"
        if size == "phone":
            # No room for the name in the bar: its initial, and the name in the menu.
            expect(avatar).to_be_visible()
            expect(avatar).to_have_text("D")
            assert not page.evaluate(NAME_WHOLE_JS, user.username), where
        else:
            expect(avatar).to_be_hidden()
            assert page.evaluate(NAME_WHOLE_JS, user.username), where
        # Whoever reads the page aloud hears the name whole.
        expect(menu.locator("summary")).to_have_accessible_name(re.compile(rf"^{re.escape(user.username)}\b"))
        menu.locator("summary").click()
        listed = menu.locator(".user-menu-list")
        expect(listed).to_be_visible()
        named = listed.locator(".user-menu-who strong")
        expect(named).to_have_text(user.username)
        assert page.evaluate(NAME_WHOLE_JS, user.username), where
        # On one line, where the window has room for it.
        assert named.evaluate(LINES_JS) == 1, where
        expect(listed).to_be_in_viewport(ratio=1)
        screenshot(page, name=f"{where}-menu")
        menu.locator("summary").click()
        expect(listed).to_be_hidden()


LONG_TITLES = {
    "en": "Compare heat pumps and home batteries in cold climates",
    "zh-hans": "比较空气源热泵和家用储能电池在寒冷地区的适用性",
}
# Whether an element's text shows whole (not cut by its ellipsis).
WHOLE_JS = "(e) => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight"
# Whether an element lies within the window's width.
ON_SCREEN_JS = "(e) => e.getBoundingClientRect().left >= 0 && e.getBoundingClientRect().right <= window.innerWidth"
# Whether each row of the list keeps its ⋯ button on its title's line.
ONE_LINE_JS = """() => [...document.querySelectorAll("li.conversation-item")].every((item) => {
  const link = item.querySelector("a").getBoundingClientRect();
  const button = item.querySelector(".item-menu-button").getBoundingClientRect();
  return button.top < link.bottom && button.bottom > link.top;
})"""


def test_a_long_title_reads_whole_in_the_head_and_on_one_line_in_the_list_with_a_fork_told_apart(
    portal, new_page, screenshot
):
    user = portal.user_create(prefix="e2e-titles")
    code = (
        "from tests.e2e.seed import long_conversation; from conversations.models import Conversation; "
        f"ids = [long_conversation(username={user.username!r}, turns=1) for _ in range(3)]; "
        f"titles = {list(LONG_TITLES.values())!r}; "
        "[Conversation.objects.filter(pk=pk).update(title=t) for pk, t in zip(ids, titles * 2)]; "
        # The third continues the first, as "Continue from here" makes it (conversations.lifecycle).
        "Conversation.objects.filter(pk=ids[2]).update(title=titles[0], forked_from_id=ids[0]); "
        "print(' '.join(ids))"
    )
    english, chinese, fork = portal.shell(code).split()
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=user)
    for language, conversation in (("en", english), ("zh-hans", chinese)):
        page.goto(f"{portal.base_url}/c/{conversation}/")
        if language != "en":
            page.locator("#language-select").select_option(language)
            expect(page.locator("html")).to_have_attribute("lang", language)
        title = page.locator("#conversation-title")
        expect(title).to_have_text(LONG_TITLES[language])
        expect(title).to_have_attribute("title", LONG_TITLES[language])
        items = page.locator("li.conversation-item")
        expect(items.locator(".fork-mark")).to_have_count(1)
        expect(page.locator(f'li[data-conversation="{fork}"] .fork-mark')).to_have_text(
            "copy" if language == "en" else "副本"
        )
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            # Beside the list and the pane on a laptop, beside the pane on a tablet: the title whole.
            if size != "phone":
                assert title.evaluate(WHOLE_JS), (language, size)
            # Export, Share, Rename and Delete are in the head's menu, by keyboard too.
            menu = page.locator("details.head-menu")
            menu.locator(":scope > summary").focus()
            page.keyboard.press("Enter")
            for name in (
                ("Export", "Share", "Rename", "Delete") if language == "en" else ("导出", "共享", "重命名", "删除")
            ):
                expect(menu.locator(".head-menu-list")).to_contain_text(name)
            page.wait_for_function("() => document.documentElement.scrollWidth <= window.innerWidth")
            # Whole on the screen: a list cut off at the left edge widens nothing a scroll would show.
            assert menu.locator(".head-menu-list").evaluate(ON_SCREEN_JS), (language, size)
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                screenshot(page, name=f"{language}-{size}-{scheme}-menu")
            page.keyboard.press("Escape")
            expect(menu).not_to_have_attribute("open", "")
            expect(menu.locator(":scope > summary")).to_be_focused()
            if size != "laptop":
                page.locator(".drawer-toggle").click()
                page.wait_for_function(DRAWER_IN_JS)
            # Every row: the title cut by the width on one line, its ⋯ button beside it.
            assert page.evaluate(ONE_LINE_JS), (language, size)
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                screenshot(page, name=f"{language}-{size}-{scheme}")
            if size != "laptop":
                page.keyboard.press("Escape")
            page.emulate_media(color_scheme="light")
        page.set_viewport_size({"width": 1366, "height": 900})
