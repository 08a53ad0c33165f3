"""The settings page in the browser: a chosen theme beats the system's."""

import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in
from tests.e2e.test_layout import sizes_schemes_languages
from tests.e2e.test_run_state import NOTIFICATIONS_JS

pytestmark = pytest.mark.e2e

BACKGROUND_JS = "getComputedStyle(document.body).backgroundColor"
LIGHT, DARK = "rgb(255, 255, 255)", "rgb(22, 24, 28)"
# The language menu's colours, and the page's.
LANGUAGE_COLOURS_JS = """() => {
  const select = getComputedStyle(document.getElementById("language-select"));
  const body = getComputedStyle(document.body);
  return {background: select.backgroundColor, color: select.color, page: body.backgroundColor, text: body.color};
}"""


@pytest.fixture
def user(portal):
    user = portal.users[1]
    yield user
    # The portal is shared by the session's tests: the user's theme goes back to the system's.
    portal.shell(
        "from accounts.models import UserPreference; "
        f"UserPreference.objects.filter(user__username={user.username!r}).update(theme='system')"
    )


@pytest.mark.parametrize(("system", "chosen", "expected"), [("light", "Dark", DARK), ("dark", "Light", LIGHT)])
def test_a_chosen_theme_beats_the_systems_after_a_reload(portal, new_page, user, system, chosen, expected):
    page = new_page(color_scheme=system)
    sign_in(page, portal=portal, user=user)
    assert page.evaluate(BACKGROUND_JS) == (LIGHT if system == "light" else DARK)

    page.locator(".user-menu > summary").click()
    page.get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    page.get_by_label(chosen).check()
    page.get_by_role("button", name="Save theme").click()
    expect(page.get_by_role("status")).to_have_text("Your theme is saved.")
    page.reload()

    assert page.evaluate(BACKGROUND_JS) == expected
    expect(page.get_by_label(chosen)).to_be_checked()
    page.goto(f"{portal.base_url}/")
    assert page.evaluate(BACKGROUND_JS) == expected


def test_notifications_turned_on_in_settings_are_on_in_the_conversation_list(portal, new_page, user):
    page = new_page()
    page.add_init_script(NOTIFICATIONS_JS)
    sign_in(page, portal=portal, user=user)
    page.goto(f"{portal.base_url}/accounts/settings/")
    section = page.locator("section", has=page.get_by_role("heading", name="Notifications"))
    toggle = section.get_by_role("button", name="Notify me")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("window.asked") == 0

    toggle.click()

    expect(section.get_by_role("button", name="Notifications on")).to_have_attribute("aria-pressed", "true")
    assert page.evaluate("window.asked") == 1
    page.goto(f"{portal.base_url}/")
    expect(page.locator("#conversation-list").get_by_role("button", name="Notifications on")).to_be_visible()
    assert page.evaluate("window.asked") == 0


def _light(colour: str) -> bool:
    red, green, blue = (int(part) for part in colour.removeprefix("rgb(").removesuffix(")").split(",")[:3])
    return red + green + blue > 3 * 128


def test_the_language_menu_wears_the_pages_colours_in_dark_too(portal, new_page, screenshot):
    page = new_page()
    sign_in(page, portal=portal, user=portal.user_create(prefix="e2e-dark-menu"))

    for size, scheme, language in sizes_schemes_languages(page):
        where = f"{size}-{scheme}-{language}"
        colours = page.evaluate(LANGUAGE_COLOURS_JS)
        if scheme == "dark":
            # Not the browser's grey: the page's own background and text.
            assert colours["page"] == DARK, where
            assert (colours["background"], colours["color"]) == (colours["page"], colours["text"]), where
        else:
            assert colours["page"] == LIGHT and _light(colours["background"]) and not _light(colours["color"]), where
        screenshot(page, name=where)
