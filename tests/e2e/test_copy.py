"""Copy buttons: an answer's markdown, a code block's text and an artifact's text reach the clipboard."""

import pytest
from playwright.sync_api import expect

from tests import waits
from tests.e2e.test_first_turn import sign_in

pytestmark = pytest.mark.e2e

ANSWER = "## 热泵的效率\n\n空气源热泵在**零度以下**仍然有效。\n\n```python\nprint('你好, 热泵')\nx = 1 < 2\n```\n\n最后一句。"
REPORT = '# 报告\n\n地源热泵安装更贵。\n\n```bash\necho "<b>安全</b>" && ls -la\n```\n'


@pytest.fixture
def copy_page(new_page, portal):
    page = new_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=portal.base_url)
    return page


def clipboard(page) -> str:
    return page.evaluate("navigator.clipboard.readText()")


def clipboard_comes_to_hold(page, expected: str) -> None:
    """The clipboard holds `expected` once the copy the click started has been
    written: a busy browser may show the button's "Copied" first."""
    held = None

    def holds() -> bool:
        nonlocal held
        held = clipboard(page)
        return held == expected

    try:
        # Chromium writes the clipboard in another process: on a busy machine, seconds later.
        waits.until(holds, timeout=15, interval=0.05)
    except AssertionError:
        raise AssertionError(f"the clipboard holds {held!r}, not {expected!r}") from None


def test_copy_buttons_copy_markdown_code_and_artifact_text(portal, copy_page, screenshot):
    page = copy_page
    user = portal.users[0]
    code = f"from tests.e2e import seed; print(seed.copyable_conversation(username={user.username!r}, answer={ANSWER!r}, report={REPORT!r}))"
    conversation_id = portal.shell(code).strip()
    sign_in(page, portal=portal, user=user)
    page.goto(f"{portal.base_url}/c/{conversation_id}/?artifact=research_report")

    turn = page.locator("article.turn")
    answer_button = turn.locator("button[data-copy^=answer-source]")
    expect(answer_button).to_have_text("Copy answer")
    answer_button.focus()
    page.keyboard.press("Enter")
    expect(answer_button).to_have_text("Copied")
    clipboard_comes_to_hold(page, ANSWER)
    expect(page.locator("[aria-live=polite]")).to_have_text("Copied")
    expect(answer_button).to_have_text("Copy answer")

    code_button = turn.locator(".answer button.copy-code")
    code_button.click()
    expect(code_button).to_have_text("Copied")
    clipboard_comes_to_hold(page, "print('你好, 热泵')\nx = 1 < 2\n")

    pane = page.locator("#artifact-pane")
    text_button = pane.locator("button[data-copy=artifact-source]")
    expect(text_button).to_have_text("Copy text")
    text_button.click()
    expect(text_button).to_have_text("Copied")
    clipboard_comes_to_hold(page, REPORT)
    pane.locator(".artifact-content button.copy-code").click()
    clipboard_comes_to_hold(page, 'echo "<b>安全</b>" && ls -la\n')
    screenshot(page, name="copied")
