"""The browser tests' portal is shared by a module's tests, so a turn one test
leaves going is ended before the next test scripts its model's replies."""

import re

import pytest
from playwright.sync_api import expect

from tests import waits
from tests.agents.test_engine import call
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

HELD = "第一句已经写出。"


def _going(portal, *users) -> list[str]:
    """The statuses of the users' turns not yet ended (the portal is shared with other tests)."""
    names = [user.username for user in users]
    code = (
        "from agents.models import Run; "
        f"going = Run.objects.filter(status__in=Run.ACTIVE_STATUSES, message__conversation__owner__username__in={names!r}); "
        "print(' '.join(sorted(going.values_list('status', flat=True))))"
    )
    return portal.shell(code).split()


def test_turns_left_waiting_for_approval_or_held_mid_stream_are_ended(portal, model_server, new_page):
    # One turn waits for its owner's approval, which nobody will give.
    model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999")),
        Text(call("web_fetch", url="library://999")),
    )
    waiting = new_page()
    users = portal.user_create(prefix="e2e-left-waiting"), portal.user_create(prefix="e2e-left-held")
    sign_in(waiting, portal=portal, user=users[0])
    ask(waiting, question="读一下那份文件")
    expect(waiting.locator("form.permission")).to_be_visible(timeout=TURN_TIMEOUT)
    # The other streams until the test would release it, which it never does.
    model_server.add(Text(HELD + "第二句等着。", hold="第二句"))
    held = new_page()
    sign_in(held, portal=portal, user=users[1])
    ask(held, question="写两句话")
    waits.until(lambda: HELD in "".join(piece for _, piece in model_server.sent), timeout=20)
    assert _going(portal, *users) == ["running", "waiting_permission"]

    portal.runs_end()

    assert _going(portal, *users) == []
    waiting.bring_to_front()
    expect(waiting.locator("article.turn").first).to_have_attribute("data-status", "cancelled")
    # Released, the held stream may end before its worker reads the cancel: either way it ended.
    held.bring_to_front()
    expect(held.locator("article.turn").first).to_have_attribute("data-status", re.compile("^(cancelled|completed)$"))
