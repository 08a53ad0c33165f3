"""Projects and repeating research in the browser: a project made, asked in
and found in the sidebar under its name; its page; a schedule set from a
conversation. At the laptop's and the phone's widths, light and dark,
English and Chinese."""

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in
from tests.e2e.test_layout import DRAWER_IN_JS, SIZES
from tests.model_server import Text

pytestmark = pytest.mark.e2e

FITS_JS = "() => document.documentElement.scrollWidth <= window.innerWidth"
WIDTHS = ("laptop", "phone")
SCHEMES = ("light", "dark")


def _language(page, language):
    if page.locator("html").get_attribute("lang") != language:
        page.set_viewport_size(dict(zip(("width", "height"), SIZES["laptop"], strict=True)))
        page.locator("#language-select").select_option(language)
        expect(page.locator("html")).to_have_attribute("lang", language)


def _sizes_and_schemes(page):
    for size in WIDTHS:
        width, height = SIZES[size]
        page.set_viewport_size({"width": width, "height": height})
        for scheme in SCHEMES:
            page.emulate_media(color_scheme=scheme)
            yield size, scheme


def _sidebar(page, size):
    """The conversation list, opened as a drawer where the page is too narrow for it beside the chat."""
    sidebar = page.locator("#conversation-list")
    if size == "phone" and not sidebar.evaluate("(e) => e.matches(':popover-open')"):
        page.locator(".drawer-toggle").click()
        page.wait_for_function(DRAWER_IN_JS)
    expect(sidebar).to_be_visible()
    return sidebar


def test_a_project_made_and_asked_in_is_in_the_sidebar_under_its_name(portal, model_server, new_page, screenshot):
    user = portal.user_create(prefix="e2e-project")
    page = new_page()
    sign_in(page, portal=portal, user=user)
    page.set_viewport_size({"width": 1366, "height": 900})

    page.locator("#sidebar-projects").get_by_role("link", name="New project").click()
    page.get_by_label("Name").fill("热泵市场 · Heat pump market")
    page.get_by_label("Standing instructions").fill("Write for the board: one page, figures first.")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="热泵市场 · Heat pump market", level=1)).to_be_visible()
    expect(page.locator(".project-instructions")).to_contain_text("figures first")

    model_server.add(Text("Figures first: an air-source heat pump costs about 9,000 to 14,000 euros installed."))
    page.get_by_label("Your question").fill("How much do air-source heat pumps cost this year?")
    page.get_by_role("button", name="Ask").click()
    expect(page).to_have_url(re.compile(r"/c/[0-9a-f-]{36}/$"))
    expect(page.locator(".conversation-project")).to_contain_text("热泵市场")
    expect(page.locator("#thread .answer").last).to_contain_text("9,000 to 14,000 euros")
    # The lead agent was told the project's standing instructions.
    assert "Write for the board: one page, figures first." in str(model_server.requests[0]["messages"][0])

    entry = page.locator(".project-entry", has_text="热泵市场")
    expect(entry.locator("details")).to_have_attribute("open", "")
    expect(entry.get_by_role("link", name="How much do air-source heat pumps cost this year?")).to_have_attribute(
        "aria-current", "page"
    )
    # Listed under its project, not again under the dates.
    expect(page.locator("#conversation-items .conversation-item")).to_have_count(0)

    for language in ("en", "zh-hans"):
        _language(page, language)
        for size, scheme in _sizes_and_schemes(page):
            sidebar = _sidebar(page, size)
            expect(sidebar.locator(".project-entry", has_text="热泵市场")).to_be_visible()
            page.wait_for_function(FITS_JS)
            screenshot(page, name=f"{language}-{size}-{scheme}-sidebar")
            if size == "phone":
                page.keyboard.press("Escape")

        page.locator(".conversation-project a").click()
        expect(page.locator(".project-page h1")).to_have_text("热泵市场 · Heat pump market")
        expect(page.locator(".project-conversations li")).to_have_count(1)
        for size, scheme in _sizes_and_schemes(page):
            page.wait_for_function(FITS_JS)
            screenshot(page, name=f"{language}-{size}-{scheme}-project")
        page.locator(".project-conversations a").first.click()
        expect(page.locator(".conversation-project")).to_be_visible()


def test_repeat_this_research_sets_a_weekly_schedule_in_the_browsers_time_zone(portal, new_page, screenshot):
    user = portal.user_create(prefix="e2e-schedule")
    # An answered question, not a queued turn: the portal's worker would run one whenever
    # its sweep found it, taking another test's scripted reply.
    conversation_id = portal.shell(
        "from django.contrib.auth import get_user_model; from projects.services import project_create; "
        "from tests.e2e.seed import long_conversation; "
        f"project_create(user=get_user_model().objects.get(username={user.username!r}), name='储能 · Storage'); "
        f"print(long_conversation(username={user.username!r}, turns=1, question='储能电池价格本周有什么变化？', "
        "answer='价格持平。'))"
    ).strip()
    page = new_page(timezone_id="Asia/Shanghai")
    sign_in(page, portal=portal, user=user)
    for language in ("en", "zh-hans"):
        _language(page, language)
        for size, scheme in _sizes_and_schemes(page):
            page.goto(f"{portal.base_url}/c/{conversation_id}/schedule/")
            form = page.locator(".schedule-form")
            expect(form.locator("[name=time_zone]")).to_have_value(
                "Asia/Shanghai" if not page.locator(".schedule-state").count() else re.compile(".+")
            )
            page.wait_for_function(FITS_JS)
            screenshot(page, name=f"{language}-{size}-{scheme}-schedule")

    _language(page, "en")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{portal.base_url}/c/{conversation_id}/")
    page.locator(".head-menu > summary").click()
    expect(page.locator(".head-menu-list")).to_be_visible()
    page.locator(".move-project > summary").click()
    expect(page.get_by_label("Move to")).to_have_value("")
    page.wait_for_function(FITS_JS)
    screenshot(page, name="menu")
    page.get_by_role("link", name="Repeat this research").click()
    form = page.locator(".schedule-form")
    expect(form.get_by_label("Ask each time")).to_have_value("储能电池价格本周有什么变化？")
    form.get_by_label("Repeats").select_option("weekly")
    expect(form.locator("[data-for=monthly]")).to_be_hidden()
    form.get_by_label("Mon", exact=True).check()
    form.get_by_label("Thu", exact=True).check()
    form.get_by_label("At", exact=True).fill("07:30")
    form.get_by_role("button", name="Repeat it").click()

    state = page.locator(".schedule-state")
    # The next run in the schedule's own zone: a Monday or a Thursday at 07:30 there.
    expect(state).to_contain_text(re.compile(r"Weekly, 07:30 \(Asia/Shanghai\) · next (Mon|Thu) \d+ \w+ 07:30"))
    expect(page.get_by_role("status").filter(has_text="The research will repeat.")).to_be_visible()
    form.get_by_label("Repeats").select_option("monthly")
    expect(form.locator("[data-for=weekly]")).to_be_hidden()
    expect(form.get_by_label("Day of the month")).to_be_visible()
    screenshot(page, name="set")

    page.get_by_role("button", name="Pause").click()
    expect(state).to_have_text("Paused")
    page.goto(f"{portal.base_url}/accounts/settings/")
    schedules = page.locator(".settings-schedules")
    expect(schedules.get_by_role("link", name="储能电池价格本周有什么变化？")).to_be_visible()
    expect(schedules).to_contain_text("Paused by its owner.")
