"""The browser tests' portal is shared by a module's tests, so a turn one test
leaves going is ended before the next test scripts its model's replies."""

import re

import pytest
from playwright.sync_api import expect

from tests.agents.test_engine import call
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

ACTIVE_JS = (
    "from agents.models import Run; "
    "print(sorted(Run.objects.filter(status__in=Run.ACTIVE_STATUSES).values_list('status', flat=True)))"
)


def test_turns_left_waiting_for_approval_or_held_mid_stream_are_ended(portal, model_server, new_page):
    # One turn waits for its owner's approval, which nobody will give.
    model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999")),
        Text(call("web_fetch", url="library://999")),
    )
    waiting = new_page()
    sign_in(waiting, portal=portal, user=portal.user_create(prefix="e2e-left-waiting"))
    ask(waiting, question="读一下那份文件")
    expect(waiting.locator("form.permission")).to_be_visible(timeout=TURN_TIMEOUT)
    # The other streams until the test would release it, which it never does.
    # Over half a second: a page is sent what came when more comes, at most every
    # RUN_LIVE_SECONDS, so the pieces just before the hold wait for the release.
    model_server.add(Text("第一句已经写出，" * 5 + "第二句等着。", chunk_size=4, delay=0.05, hold="第二句"))
    held = new_page()
    sign_in(held, portal=portal, user=portal.user_create(prefix="e2e-left-held"))
    ask(held, question="写两句话")
    # In front: a page behind another gets no animation frame to show the text in.
    held.bring_to_front()
    expect(held.locator(".answer").first).to_contain_text("第一句", timeout=TURN_TIMEOUT)
    assert portal.shell(ACTIVE_JS).strip() == "['running', 'waiting_permission']"

    portal.runs_end()

    assert portal.shell(ACTIVE_JS).strip() == "[]"
    waiting.bring_to_front()
    expect(waiting.locator("article.turn").first).to_have_attribute("data-status", "cancelled")
    # Released, the held stream may end before its worker reads the cancel: either way it ended.
    held.bring_to_front()
    expect(held.locator("article.turn").first).to_have_attribute("data-status", re.compile("^(cancelled|completed)$"))
