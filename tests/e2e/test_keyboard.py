"""Keyboard and touch: focus on opening, few tab stops however long the thread,
the shortcuts and their overlay, focus kept in the drawer and the sheet, and
touch targets of at least 44x44 px on a phone (static/js/keys.js)."""

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}
# What has focus, named for a failure message.
FOCUSED_JS = """() => { const e = document.activeElement;
  return `${e.tagName.toLowerCase()}#${e.id}.${e.className}: ${(e.getAttribute('aria-label') || e.textContent).trim().slice(0, 40)}`; }"""


def _targets_js(*, controls: str, inline: str) -> str:
    """Every visible control `controls` selects, but those inside `inline` text
    (WCAG 2.5.5 exempts inline links), as shown: its name and box."""
    return f"""() => [...document.querySelectorAll({controls!r})]
  .filter((e) => e.checkVisibility() && !e.closest({inline!r}))
  .map((e) => {{ const r = e.getBoundingClientRect();
    return {{ name: `${{e.tagName}} ${{(e.getAttribute('aria-label') || e.textContent).trim().slice(0, 30)}}`,
             width: r.width, height: r.height, left: r.left, right: r.right }}; }})"""


# What one can tap in the top bar, the conversation's head, the thread, the composer and the list.
TARGETS_JS = _targets_js(
    controls=".topbar :is(a[href], button, summary, select), #conversation-head :is(a[href], button, summary, select),"
    " #thread :is(a[href], button, summary, select), #composer :is(button, summary, select),"
    " #conversation-list :is(a[href], button, input)",
    inline=".answer",
)
# What one can tap in the artifact pane's sheet.
PANE_TARGETS_JS = _targets_js(controls="#pane-frame :is(a[href], button, summary, select)", inline=".artifact-content")


def _long_thread(portal, *, user, branches=False):
    """A 40-turn thread; with `branches`, its last question has a second version beside it."""
    code = (
        "from conversations.models import Message; from tests.e2e.seed import long_conversation; "
        f"conversation = long_conversation(username={user.username!r}, turns=40); "
    )
    if branches:
        code += (
            "last = Message.objects.filter(conversation_id=conversation).order_by('-pk').first(); "
            "Message.objects.create(conversation=last.conversation, parent=last.parent, content='Question 40, put otherwise', "
            "response='Another answer.'); "
        )
    code += "print(conversation)"
    return f"{portal.base_url}/c/{portal.shell(code).strip()}/"


def _tabs_until(page, selector, *, limit=60, key="Tab"):
    """Presses `key` until `selector` has focus; how many presses that took, and what had focus on the way."""
    path = []
    for presses in range(1, limit + 1):
        page.keyboard.press(key)
        path.append(page.evaluate(FOCUSED_JS))
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return presses, path
    raise AssertionError(f"{selector} never had focus after {limit} presses of {key}: {path}")


def test_a_long_thread_opens_in_its_composer_and_costs_few_tab_stops(portal, new_page):
    user = portal.user_create(prefix="keys")
    url = _long_thread(portal, user=user)
    page = new_page(viewport=DESKTOP)
    sign_in(page, portal=portal, user=user)
    page.goto(url)
    turns = page.locator("#thread-turns > article.turn")
    expect(turns.last).to_contain_text("Question 40:")

    # With a mouse at hand, opening the conversation puts focus where one types.
    composer = page.locator("#composer-input")
    expect(composer).to_be_focused()

    # The whole thread is one stop, its newest turn; its actions follow it, then the composer.
    page.locator("#conversation-head .pane-toggle").focus()
    presses, path = _tabs_until(page, "#composer-input")
    assert presses <= 12, path
    presses, path = _tabs_until(page, "#thread-turns > article.turn", key="Shift+Tab")
    assert presses == 1, path
    expect(turns.last).to_be_focused()
    # The arrow keys move from turn to turn; Tab then reaches that turn's actions.
    page.keyboard.press("ArrowUp")
    expect(turns.nth(-2)).to_be_focused()
    page.keyboard.press("Tab")
    expect(turns.nth(-2).get_by_text("Edit", exact=True)).to_be_focused()
    page.keyboard.press("Home")  # on a control, not a turn: nothing moves
    expect(turns.nth(-2).get_by_text("Edit", exact=True)).to_be_focused()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("End")
    expect(turns.last).to_be_focused()
    # Only the turn in hand has actions in the tab order.
    tabbable = page.evaluate(
        "() => [...document.querySelectorAll('#thread-turns :is(button, summary, a[href])')].filter((e) => e.tabIndex >= 0).length"
    )
    assert 1 <= tabbable <= 6


def test_a_phone_opens_a_conversation_without_its_keyboard(portal, new_page):
    user = portal.user_create(prefix="keys")
    url = _long_thread(portal, user=user)
    page = new_page(viewport=PHONE, has_touch=True, is_mobile=True)
    sign_in(page, portal=portal, user=user)
    page.goto(url)
    expect(page.locator("#thread-turns > article.turn").last).to_contain_text("Question 40:")
    assert page.evaluate("() => matchMedia('(pointer: coarse)').matches")
    expect(page.locator("body")).to_be_focused()

    # A keyboard on a tablet or phone: from the top of the page, the skip links, the second into the box.
    presses, path = _tabs_until(page, "[data-skip-composer]")
    assert presses <= 10, path
    page.keyboard.press("Enter")
    expect(page.locator("#composer-input")).to_be_focused()


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_shortcuts_work_outside_fields_and_are_listed_in_an_overlay(portal, new_page, screenshot, language):
    user = portal.user_create(prefix="keys")
    url = _long_thread(portal, user=user)
    page = new_page(viewport=DESKTOP)
    sign_in(page, portal=portal, user=user)
    page.goto(url)
    if language == "zh-hans":
        page.locator("#language-select").select_option("zh-hans")
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    composer = page.locator("#composer-input")
    search = page.locator("#conversation-search")
    expect(composer).to_be_focused()

    # A key alone types in a field; with Ctrl it is a shortcut anywhere.
    page.keyboard.type("a/b?")
    expect(composer).to_have_value("a/b?")
    expect(page.locator("#shortcuts")).not_to_be_visible()
    page.keyboard.press("Control+k")
    expect(search).to_be_focused()
    page.keyboard.press("Shift+Escape")
    expect(composer).to_be_focused()
    composer.fill("")

    # Outside a field, "/" searches and "?" shows the overlay.
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")
    expect(search).to_be_focused()
    expect(search).to_have_value("")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("?")
    overlay = page.locator("#shortcuts")
    expect(overlay).to_be_visible()
    title = "键盘快捷键" if language == "zh-hans" else "Keyboard shortcuts"
    expect(overlay.get_by_role("heading")).to_have_text(title)
    expect(overlay).to_contain_text("新对话" if language == "zh-hans" else "New conversation")
    for theme in ("light", "dark"):
        page.emulate_media(color_scheme=theme)
        screenshot(page, name=f"overlay-{theme}")
    page.emulate_media(color_scheme="light")
    # While it is open, other shortcuts wait; Escape closes it.
    page.keyboard.press("Control+k")
    expect(search).not_to_be_focused()
    page.keyboard.press("Escape")
    expect(overlay).not_to_be_visible()

    # The account menu offers it too, and closing gives focus back.
    page.locator(".user-menu > summary").click()
    opener = page.locator("[data-shortcuts-open]")
    opener.click()
    expect(overlay).to_be_visible()
    overlay.get_by_role("button").click()
    expect(overlay).not_to_be_visible()

    # Ctrl+Shift+O starts a new conversation.
    composer.focus()
    page.keyboard.press("Control+Shift+O")
    page.wait_for_url(re.compile(r"/$"))
    expect(page.locator(".empty-state")).to_be_visible()


def test_the_drawer_and_the_sheet_keep_focus_inside_and_give_it_back(portal, new_page):
    user = portal.user_create(prefix="keys")
    url = _long_thread(portal, user=user)

    # The conversation list is a drawer below 1100 px.
    page = new_page(viewport={"width": 1024, "height": 768})
    sign_in(page, portal=portal, user=user)
    page.goto(url)
    drawer = page.locator("#conversation-list")
    toggle = page.locator(".drawer-toggle")
    toggle.focus()
    page.keyboard.press("Enter")
    expect(drawer).to_be_visible()
    stops = page.evaluate(
        "() => [...document.querySelectorAll('#conversation-list :is(a[href], button, input:not([type=hidden]), summary)')]"
        ".filter((e) => e.tabIndex >= 0 && e.checkVisibility()).length"
    )
    for _ in range(stops * 2 + 1):
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.getElementById('conversation-list').contains(document.activeElement)")
    for _ in range(stops + 1):
        page.keyboard.press("Shift+Tab")
        assert page.evaluate("() => document.getElementById('conversation-list').contains(document.activeElement)")
    page.keyboard.press("Escape")
    expect(drawer).not_to_be_visible()
    expect(toggle).to_be_focused()
    # Ctrl+K opens it on the search field; Escape gives focus back to where it was.
    page.locator("#composer-input").focus()
    page.keyboard.press("Control+k")
    expect(page.locator("#conversation-search")).to_be_focused()
    page.keyboard.press("Escape")
    expect(drawer).not_to_be_visible()
    expect(page.locator("#composer-input")).to_be_focused()

    # The artifacts are a sheet over the chat on a phone.
    page.set_viewport_size(PHONE)
    sheet = page.locator("#pane-frame")
    artifacts = page.locator("#conversation-head .pane-toggle")
    artifacts.click()
    expect(sheet).to_be_visible()
    for _ in range(40):
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.getElementById('pane-frame').contains(document.activeElement)")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("() => document.getElementById('pane-frame').contains(document.activeElement)")
    page.keyboard.press("Escape")
    expect(sheet).not_to_be_visible()
    expect(artifacts).to_be_focused()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_touch_targets_on_a_phone_are_at_least_44_px(portal, new_page, scheme, screenshot):
    user = portal.user_create(prefix="keys")
    url = _long_thread(portal, user=user, branches=True)
    page = new_page(viewport=PHONE, has_touch=True, is_mobile=True, color_scheme=scheme, reduced_motion="reduce")
    sign_in(page, portal=portal, user=user)
    page.goto(url)
    expect(page.locator(".branches button").first).to_be_visible()
    page.locator("#thread-turns > article.turn").last.locator("details.activity-log > summary").click()
    page.locator(".branches").first.scroll_into_view_if_needed()
    screenshot(page, name="phone-thread")
    targets = page.evaluate(TARGETS_JS)
    names = {target["name"] for target in targets}
    assert {"BUTTON Previous branch", "BUTTON Next branch", "SUMMARY Edit", "BUTTON Ask again", "BUTTON Send"} <= names
    small = [target for target in targets if target["width"] < 44 or target["height"] < 44]
    assert not small, small
    # Larger, they all still fit the phone's width.
    outside = [target for target in targets if target["left"] < 0 or target["right"] > PHONE["width"]]
    assert not outside, outside

    # The conversation list's drawer, and each conversation's menu in it.
    page.locator(".drawer-toggle").click()
    expect(page.locator("#conversation-list")).to_be_visible()
    screenshot(page, name="phone-drawer")
    targets = page.evaluate(TARGETS_JS)
    assert any(target["name"].startswith("BUTTON Actions for") for target in targets)
    small = [target for target in targets if target["width"] < 44 or target["height"] < 44]
    assert not small, small


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_panes_controls_on_a_phone_are_at_least_44_px(portal, new_page, scheme, screenshot):
    user = portal.user_create(prefix="keys")
    code = f"from tests.e2e.seed_pane import six_artifacts; print(six_artifacts(username={user.username!r}))"
    url = f"{portal.base_url}/c/{portal.shell(code).strip()}/"
    page = new_page(viewport=PHONE, has_touch=True, is_mobile=True, color_scheme=scheme, reduced_motion="reduce")
    sign_in(page, portal=portal, user=user)
    page.goto(url)
    page.get_by_role("button", name="Artifacts").click()
    pane = page.locator("#artifact-pane")
    expect(pane.locator(".artifact-content")).to_be_visible()
    # Every control of the sheet, its menu and its switcher open; links in the document's text are inline.
    pane.locator(".pane-menu > summary").click()
    expect(pane.locator(".pane-menu-list")).to_be_visible()
    screenshot(page, name="phone-pane")
    targets = page.evaluate(PANE_TARGETS_JS)
    names = {target["name"] for target in targets}
    assert {"A Edit", "BUTTON Upload"} <= names, names
    assert any(name.startswith("SUMMARY More") for name in names), names
    small = [target for target in targets if target["width"] < 44 or target["height"] < 44]
    assert not small, small


def test_a_desktop_keeps_its_compact_controls(portal, new_page):
    user = portal.user_create(prefix="keys")
    url = _long_thread(portal, user=user)
    page = new_page(viewport=DESKTOP)
    sign_in(page, portal=portal, user=user)
    page.goto(url)
    ask_again = page.locator("#thread-turns > article.turn").last.get_by_role("button", name="Ask again")
    assert ask_again.bounding_box()["height"] < 30
