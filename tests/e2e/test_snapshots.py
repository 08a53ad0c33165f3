"""Web pages as the crawl agent read them, and a report's citations, in the
browser: an answer's link, a report's link and the Activity's source open the
page's snapshot (what it said when it was read, not what it says now) with
the live page a click away; a quote is marked where the snapshot holds it; a
page no agent read says so. A report's numbered citation opens its source at
the words it quotes, a web snapshot or a library passage, even where its
punctuation differs; the citation check marks an invented quotation. English
and Chinese, 1366 and 390 px, light and dark."""

import pytest
from playwright.sync_api import expect

from tests.agents.test_engine import call
from tests.e2e.conftest import portal_running
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text
from tests.web_pages import ALLOWED_HOST, PageSite, html_page

pytestmark = pytest.mark.e2e

PRICES = [
    "空气源热泵的安装价格为每千瓦一千二百元，比去年下降了百分之八。",
    "北方地区的补贴政策仍然有效，申请需要提供安装合同和发票。",
]
PRICES_NOW = ["空气源热泵的安装价格为每千瓦一千五百元。", "补贴已经取消。"]
SURVEY = [
    "Heat pumps installed in 2026 kept homes at 20 °C down to −15 °C outside.",
    "The median seasonal efficiency (SCOP) was 3.1 across the 212 surveyed homes.",
]


@pytest.fixture(scope="module")
def site():
    running = PageSite().start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory):
    """A portal of this module's own whose worker may read pages on this machine, unasked."""
    with portal_running(
        template=portal_template,
        data_dir=tmp_path_factory.mktemp("portal-snapshots"),
        extra_env={"ARTIFACTFLOW_FETCH_ALLOWED_HOSTS": ALLOWED_HOST, "ARTIFACTFLOW_TOOL_PERMISSIONS": "web_fetch=auto"},
    ) as running:
        yield running


def test_a_cited_page_opens_as_the_agent_read_it(portal, model_server, site, new_page, screenshot):
    site.pages["/prices"] = html_page(title="今日热泵价格", paragraphs=PRICES)
    site.pages["/survey"] = html_page(title="Heat pump survey 2026", paragraphs=SURVEY)
    prices, survey, unread = site.url("/prices"), site.url("/survey"), site.url("/never-read")
    model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read the price page and the survey")),
        Text(call("web_fetch", url=prices)),
        Text(call("web_fetch", url=survey)),
        Text("每千瓦一千二百元; SCOP 3.1."),
        Text(
            call(
                "create_artifact",
                id="report",
                title="Heat pump costs",
                content=f"# Heat pump costs\n\nThe median SCOP was 3.1 ([survey]({survey})).",
            )
        ),
        Text(f"安装价格为每千瓦一千二百元（[今日价格]({prices})）。See also [a page nobody read]({unread})."),
    )
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="What do heat pumps cost?")
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    # By the time the answer is read, the page says something else.
    site.pages["/prices"] = html_page(title="今日热泵价格", paragraphs=PRICES_NOW)

    link = turn.locator(".answer a", has_text="今日价格")
    expect(link).to_have_attribute("href", prices)
    with page.expect_popup() as opened:
        link.click()
    snapshot = opened.value
    expect(snapshot.locator(".library-head h1")).to_have_text("今日热泵价格")
    expect(snapshot.locator("article")).to_contain_text("每千瓦一千二百元")
    expect(snapshot.locator("article")).not_to_contain_text("一千五百元")
    expect(snapshot.locator(".snapshot-url")).to_have_text(prices)
    live = snapshot.get_by_role("link", name="Open the live page ↗")
    expect(live).to_have_attribute("href", prices)
    expect(live).to_have_attribute("target", "_blank")
    screenshot(snapshot, name="1366-light-snapshot")
    snapshot_path = snapshot.url.removeprefix(portal.base_url)
    snapshot.close()

    # The report's link, in the pane.
    pane = page.locator("#artifact-pane")
    with page.expect_popup() as opened:
        pane.locator(".artifact-content a", has_text="survey").click()
    report_source = opened.value
    expect(report_source.locator(".library-head h1")).to_have_text("Heat pump survey 2026")
    expect(report_source.locator("article")).to_contain_text("SCOP) was 3.1")
    report_source.close()

    # The Activity's source for the page read.
    turn.locator(".activity-log summary").click()
    source = turn.locator(".step-sources a", has_text="今日热泵价格")
    expect(source).to_have_attribute("href", snapshot_path)

    # A link to a page no agent read says so, and offers the live page.
    with page.expect_popup() as opened:
        turn.locator(".answer a", has_text="a page nobody read").click()
    missing = opened.value
    expect(missing.locator("main h1")).to_have_text("No snapshot of this page")
    expect(missing.get_by_role("link", name="Open the live page ↗")).to_have_attribute("href", unread)
    screenshot(missing, name="1366-light-no-snapshot")
    missing.close()

    # A quote marked where the snapshot holds it, and said when it does not: both languages, phone and desktop.
    for width, height, scheme, locale in (
        (1366, 900, "dark", "zh-CN"),
        (390, 844, "light", "en"),
        (390, 844, "dark", "zh-CN"),
    ):
        reader = new_page(viewport={"width": width, "height": height}, color_scheme=scheme, locale=locale)
        sign_in(reader, portal=portal, user=portal.users[0])
        reader.goto(f"{portal.base_url}{snapshot_path}?q=申请需要提供安装合同#passage")
        expect(reader.locator("mark#passage")).to_have_text("申请需要提供安装合同")
        expect(reader.locator("mark#passage")).to_be_in_viewport()
        reader.screenshot(path=screenshot(reader, name=f"{width}-{scheme}-{locale}-quote"))
        reader.goto(f"{portal.base_url}{snapshot_path}?q=补贴已经取消")
        expect(reader.locator(".snapshot-unfound")).to_contain_text("补贴已经取消")
        expect(reader.locator("article mark")).to_have_count(0)
        screenshot(reader, name=f"{width}-{scheme}-{locale}-quote-missing")
        if locale == "zh-CN":
            expect(reader.locator(".snapshot-live a")).to_have_text("打开当前网页 ↗")


HANDBOOK = "# 热泵手册\n\n## 噪声\n\n" + "安装说明。" * 300 + "\n\n室外机一米处约五十分贝，夜间应低于四十五分贝。\n"
REPORT = """# 热泵报告

Homes were kept “at 20 °C, down to -15 °C outside” [1]. 价格“每千瓦一千二百元 比去年下降了百分之八”[2]。

An invented claim: “prices doubled in 2026” [1]. 手册说“室外机一米处约五十分贝”[3]。

## Sources
[1] [Heat pump survey 2026]({survey})
[2] [今日热泵价格]({prices})
[3] [热泵手册]({handbook})
"""


@pytest.mark.parametrize(
    ("width", "scheme", "locale"), [(1366, "light", "en"), (390, "dark", "zh-CN")], ids=["1366-light-en", "390-dark-zh"]
)
def test_a_reports_citations_open_their_words_and_an_invented_quote_is_marked(
    portal, model_server, site, new_page, screenshot, width, scheme, locale
):
    user = portal.user_create(prefix="e2e-cite")
    handbook = portal.shell(
        "from django.contrib.auth import get_user_model; from library.services import library_document_create; "
        f"user = get_user_model().objects.get(username={user.username!r}); "
        f"document = library_document_create(user=user, title='热泵手册', content={HANDBOOK!r}); "
        "print(document.passages.get(text__contains='五十分贝').url)"
    ).strip()
    site.pages["/prices"] = html_page(title="今日热泵价格", paragraphs=PRICES)
    site.pages["/survey"] = html_page(title="Heat pump survey 2026", paragraphs=SURVEY)
    survey, prices = site.url("/survey"), site.url("/prices")
    model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read the survey and the prices")),
        Text(call("web_fetch", url=survey)),
        Text(call("web_fetch", url=prices)),
        Text("SCOP 3.1; 每千瓦一千二百元."),
        Text(
            call(
                "create_artifact",
                id="report",
                title="热泵报告",
                content=REPORT.format(survey=survey, prices=prices, handbook=handbook),
            )
        ),
        Text("The report is ready."),
    )
    phone = width < 600
    page = new_page(
        viewport={"width": width, "height": 844 if phone else 900}, color_scheme=scheme, locale=locale, has_touch=phone
    )
    sign_in(page, portal=portal, user=user)
    page.locator("#composer-input").fill("What do heat pumps cost?")
    page.locator("#composer button[type=submit]").click()
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    check = turn.locator(".citation-check")
    expect(check).to_contain_text("✦")
    screenshot(page, name="answer")
    if phone:
        page.locator("#pane-frame").evaluate("frame => frame.showPopover()")
    content = page.locator("#artifact-pane .artifact-content")
    expect(content.locator("h1")).to_have_text("热泵报告")

    invented = content.locator("a.citation-unfound")
    expect(invented).to_have_count(1)
    expect(invented).to_have_attribute("data-quote", "prices doubled in 2026")
    expect(content.locator(".citation-missing")).to_have_count(1)
    expect(content.locator("a.citation")).to_have_count(4)
    invented.scroll_into_view_if_needed()
    screenshot(page, name="report-marked", full_page=False)

    # The quotation with other punctuation opens the snapshot at its words.
    with page.expect_popup() as opened:
        content.locator("a.citation", has_text="[1]").first.click()
    cited = opened.value
    expect(cited.locator("mark#passage")).to_be_in_viewport()
    assert "".join(cited.locator("article mark").all_text_contents()) == "at 20 °C down to −15 °C outside"
    cited.screenshot(path=screenshot(cited, name="snapshot-quote"))
    cited.close()
    with page.expect_popup() as opened:
        content.locator("a.citation", has_text="[2]").click()
    cited = opened.value
    expect(cited.locator("mark#passage")).to_have_text("每千瓦一千二百元，比去年下降了百分之八")
    cited.close()

    # The library citation opens the document at its passage, the quoted words marked.
    with page.expect_popup() as opened:
        content.locator("a.citation", has_text="[3]").click()
    passage = opened.value
    expect(passage.locator("mark#passage")).to_have_text("室外机一米处约五十分贝")
    expect(passage.locator("mark#passage")).to_be_in_viewport()
    expect(passage.locator(".library-passage")).to_contain_text("热泵手册 › 噪声")
    passage.screenshot(path=screenshot(passage, name="library-quote"))
