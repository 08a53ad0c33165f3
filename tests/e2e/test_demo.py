"""The offline demo model in the browser: no API key, the sample library,
what a newcomer's first page offers from it, and a first question comparing two things."""

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import portal_running
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
def portal(tmp_path_factory):
    """A portal of this module's own with no API key, so the demo model answers, and the sample library."""
    with portal_running(
        data_dir=tmp_path_factory.mktemp("portal-demo"),
        extra_env={"OPENAI_API_KEY": "", "ARTIFACTFLOW_DEMO_WORD_DELAY": "0"},
    ) as running:
        running.shell("from django.core.management import call_command; call_command('library_samples', verbosity=0)")
        yield running


def test_a_comparison_reads_both_documents_and_shows_them_side_by_side(portal, new_page, screenshot):
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, base_url=portal.base_url, user=portal.users[0])

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


# What a new conversation offers from the sample library (eight documents, four in each language).
EXAMPLES = {
    "en": {
        "more": "and 2 more.",
        "titles": ["Heat pumps", "Retrieval-augmented generation (RAG)", "Solid-state batteries"],
        "question": "What does our library say about {}?",
    },
    "zh-hans": {
        "more": "，以及另外 2 篇。",
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
    sign_in(page, base_url=portal.base_url, user=portal.user_create(prefix="e2e-newcomer"))
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
