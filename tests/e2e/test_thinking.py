"""A model that thinks before it answers: its thinking shows live in a fold
above the answer, open while it thinks and closed once it answers; the
finished answer keeps it, closed, after a reload, and the Activity has it."""

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import SCREENSHOTS, screenshot_save
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

# For a person to look at: live and after, laptop and phone, light and dark.
SHOTS = SCREENSHOTS / "thinking"
WIDTHS = {"laptop": (1366, 900), "phone": (390, 844)}

THOUGHT = "".join(
    f"第 {n} 步：用户问预写日志（WAL）为什么能保证持久性。先回忆 fsync 的语义，再对比直接写数据页的做法。\n"
    for n in range(1, 25)
)
ANSWER = (
    "## 预写日志\n\n"
    + (
        "WAL 先把修改顺序追加到日志并 fsync，再改数据页：崩溃后按日志重放即可恢复。"
        "顺序写比随机写快得多，所以提交延迟更低。\n\n"
    )
    * 3
)


def _shots(page, *, name: str) -> None:
    # No drawer caught sliding away as the width changes.
    page.emulate_media(reduced_motion="reduce")
    for width, size in WIDTHS.items():
        page.set_viewport_size({"width": size[0], "height": size[1]})
        if width == "phone":
            expect(page.locator("#conversation-list")).not_to_be_in_viewport()
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            screenshot_save(page, path=SHOTS / f"{name}-{width}-{scheme}.png")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1366, "height": 900})


def test_thinking_streams_open_folds_away_when_the_answer_starts_and_stays_after_a_reload(portal, model_server, page):
    # About eight seconds of thinking, then about four of answer.
    model_server.add(Text(ANSWER, reasoning=THOUGHT, chunk_size=6, delay=0.04))
    page.set_viewport_size({"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=portal.users[0])

    ask(page, question="WAL 为什么能保证持久性？")

    turn = page.locator("article.turn").first
    fold = turn.locator("details.thinking").first
    text = fold.locator(".thinking-text")
    # Live: the fold is open, says the model is thinking, and its text grows.
    expect(fold).to_have_attribute("open", "", timeout=TURN_TIMEOUT)
    expect(fold.locator("summary")).to_have_text("Thinking…")
    expect(text).to_contain_text("第 3 步")
    assert turn.get_attribute("data-status") == "running"
    assert turn.locator(".answer").inner_text().strip() == ""
    _shots(page, name="live")
    expect(text).to_contain_text("第 6 步")

    # The answer starts: the fold closes by itself and says how long the model thought.
    expect(turn.locator(".answer")).to_contain_text("预写日志", timeout=TURN_TIMEOUT)
    expect(fold).not_to_have_attribute("open", "")
    expect(fold.locator("summary")).to_have_text(re.compile(r"^Thought for \d"))
    assert turn.get_attribute("data-status") == "running"
    _shots(page, name="answering")
    # The reader opens it again while the answer streams: it stays open when the finished message replaces it.
    fold.locator("summary").click()
    expect(fold).to_have_attribute("open", "")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(fold).to_have_attribute("open", "")
    expect(fold.locator(".thinking-text")).to_contain_text("第 24 步")

    page.reload()
    turn = page.locator("article.turn").first
    fold = turn.locator("details.thinking").first
    expect(fold).to_be_visible()
    expect(fold).not_to_have_attribute("open", "")
    expect(fold.locator("summary")).to_have_text(re.compile(r"^Thought for \d"))
    expect(turn.locator(".answer h2")).to_have_text("预写日志")
    # Never part of the answer itself, nor of what the model was sent.
    assert "第 1 步" not in turn.locator(".answer").inner_text()
    _shots(page, name="after")
    fold.locator("summary").click()
    expect(fold.locator(".thinking-text")).to_contain_text("第 24 步")
    turn.locator("details.activity-log > summary").click()
    activity_fold = turn.locator(".activity-body details.thinking")
    expect(activity_fold).to_have_count(1)
    expect(activity_fold.locator("summary")).to_contain_text("lead_agent Thought for")
    activity_fold.locator("summary").click()
    expect(activity_fold.locator(".thinking-text")).to_contain_text("第 24 步")
    _shots(page, name="after-opened")
