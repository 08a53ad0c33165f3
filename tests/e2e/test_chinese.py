"""The whole flow in Simplified Chinese, in a browser that asks for it:
sign in, ask, approve, the pane, a diff and the version history, at desktop,
laptop (dark) and phone widths, with no English of the interface's own on screen and
nothing wider than the window."""

import pytest
from playwright.sync_api import expect

from tests.agents.test_engine import call
from tests.artifactflow.test_i18n import ENGLISH_RE
from tests.e2e.test_first_turn import TURN_TIMEOUT
from tests.model_server import Text

pytestmark = pytest.mark.e2e

QUESTION = "热泵在寒冷气候中的效率如何？"
PLAN = "# 研究计划\n\n- [ ] 阅读资料\n- [ ] 撰写报告"
REPORT = "# 热泵报告\n\n空气源热泵在零下十五度时效率下降。"
HANDBOOK = "空气源热泵在寒冷气候中的性能。热泵的效率用COP衡量。"
# A library document for the crawl agent to read, and its library:// URL.
HANDBOOK_CODE = (
    "from django.contrib.auth import get_user_model; from library.services import library_document_create; "
    "user = get_user_model().objects.get(username={username!r}); "
    f"print(library_document_create(user=user, title='热泵手册', content={HANDBOOK!r}).url)"
)
# What a person sees: the visible text, and the labels they hear or hover.
SHOWN_JS = """() => {
  const parts = [document.body.innerText];
  for (const element of document.querySelectorAll("[aria-label], [title], [placeholder]")) {
    if (element.closest("#language-select") || !element.checkVisibility()) continue;
    for (const name of ["aria-label", "title", "placeholder"]) parts.push(element.getAttribute(name) || "");
  }
  return parts.join("\\n");
}"""


def _english_on_screen(page) -> list[str]:
    # The language menu names English in English, as every language menu does.
    shown = page.evaluate(SHOWN_JS).replace("English", "")
    return sorted({match.group(0) for match in ENGLISH_RE.finditer(shown)})


def _check(page, screenshot, *, name: str):
    """No English word of the interface on screen, nothing wider than the window; a screenshot."""
    screenshot(page, name=name)
    assert _english_on_screen(page) == [], name
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), name


def _send(page, question: str, *, number: int):
    page.locator("#composer-input").fill(question)
    page.get_by_role("button", name="发送", exact=True).click()
    return page.locator("article.turn").nth(number - 1)


@pytest.mark.parametrize(("width", "scheme"), [(1366, "light"), (1024, "dark"), (390, "light")])
def test_the_whole_flow_in_chinese(portal, model_server, new_page, screenshot, width, scheme):
    user = portal.user_create(prefix="e2e-zh")
    handbook = portal.shell(HANDBOOK_CODE.format(username=user.username)).strip()
    model_server.add(
        Text(call("create_artifact", id="task_plan", title="研究计划", content=PLAN)),
        Text(call("call_subagent", agent="crawl_agent", instruction=f"阅读 {handbook}")),
        Text(call("web_fetch", url=handbook)),
        Text("热泵的效率用COP衡量。"),
        Text(call("create_artifact", id="research_report", title="热泵报告", content=REPORT)),
        Text(call("update_artifact", id="task_plan", old_str="- [ ] 阅读资料", new_str="- [x] 阅读资料")),
        Text("报告已写好：空气源热泵在寒冷气候中效率下降。", chunk_size=2, delay=0.01),
        Text(call("update_artifact", id="research_report", old_str="效率下降。", new_str="效率下降，COP 约为二。")),
        Text("已补充 COP 的数值。"),
    )
    phone = width < 600
    page = new_page(
        locale="zh-CN",
        viewport={"width": width, "height": 844 if phone else 900},
        has_touch=phone,
        color_scheme=scheme,
    )

    page.goto(f"{portal.base_url}/accounts/login/")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    _check(page, screenshot, name=f"{width}-sign-in")
    page.get_by_label("用户名").fill(user.username)
    page.get_by_label("密码").fill(user.password)
    page.get_by_role("button", name="登录").click()
    expect(page.locator(".who")).to_have_text(user.username)
    _check(page, screenshot, name=f"{width}-new-conversation")

    first = _send(page, QUESTION, number=1)
    prompt = page.locator("form.permission")
    expect(prompt).to_contain_text(handbook, timeout=TURN_TIMEOUT)
    _check(page, screenshot, name=f"{width}-approval")
    prompt.get_by_role("button", name="批准", exact=True).click()
    expect(first).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(first.locator(".answer")).to_have_text("报告已写好：空气源热泵在寒冷气候中效率下降。")
    first.locator(".activity-log summary").click()
    expect(first.locator(".activity-steps")).to_contain_text("web_fetch")
    _check(page, screenshot, name=f"{width}-answered")

    second = _send(page, "请补充 COP 的数值", number=2)
    expect(second).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    if phone:
        page.locator(".pane-toggle").click()
    pane = page.locator("#artifact-pane")
    # With an artifact open, the list is folded into the switcher.
    switcher = pane.locator(".artifact-switcher")
    switcher.locator("summary").click()
    switcher.get_by_role("link", name="热泵报告").click()
    expect(pane.locator(".switcher-title")).to_have_text("热泵报告")
    expect(pane.locator(".artifact-content")).to_contain_text("COP 约为二")
    _check(page, screenshot, name=f"{width}-pane")

    pane.locator(".pane-menu summary").click()
    pane.locator("#diff-from").select_option("1")
    pane.locator("#diff-to").select_option("2")
    pane.get_by_role("button", name="比较", exact=True).click()
    expect(pane.locator(".diff-line.diff-add ins")).to_contain_text("COP 约为二")
    _check(page, screenshot, name=f"{width}-diff")

    pane.locator("#version-select").select_option("1")
    expect(pane.locator(".old-version")).to_be_visible()
    expect(pane.get_by_role("button", name="恢复此版本")).to_be_visible()
    _check(page, screenshot, name=f"{width}-history")

    # The menu switches at once, a draft in the composer comes along, and the
    # choice outlasts the browser's.
    page.locator("#composer-input").fill("还没发送的草稿")
    page.locator("#language-select").select_option("en")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("#composer-input")).to_have_value("还没发送的草稿")
    if phone:
        page.locator(".pane-toggle").click()
    expect(pane.get_by_role("button", name="Restore this version")).to_be_visible()
    page.reload()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible()
