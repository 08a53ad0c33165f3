"""A long answer watched from a tab that sat idle first: it streams as appended
text over the one websocket the page opened, and ends rendered whole."""

import itertools
import re
import time

import pytest
from playwright.sync_api import expect

from tests.answers import long_answer
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

# Longer than the channel layer's 5 s blocking read and redis-py's default timeout.
IDLE_SECONDS = 12
# The sections the page shows rendered, sampled while the answer streams.
SECTIONS_JS = """(message) => {
  const turn = document.getElementById(message);
  return {
    status: turn.dataset.status,
    sections: [...turn.querySelectorAll(".answer h2")].map((h) => h.textContent),
    tail: (turn.querySelector(".answer-tail") || {}).textContent || "",
  };
}"""


def test_an_idle_tab_watches_a_long_answer_stream_on_one_websocket(portal, model_server, page, screenshot):
    answer = long_answer(tokens=2500)
    model_server.add(Text("Short first answer.", chunk_size=8))
    model_server.add(Text(answer, chunk_size=24, delay=0.01))
    sockets = []
    page.on("websocket", lambda socket: sockets.append(socket))
    page.set_viewport_size({"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="First, a short one.")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    page.wait_for_timeout(IDLE_SECONDS * 1000)
    page.locator("#composer-input").fill("Now the long report, please.")
    page.get_by_role("button", name="Send").click()
    second = page.locator("article.turn").nth(1)
    # The worker's pickup is the one wait here that grows with the machine's
    # load; the answer then streams for several seconds, long enough to see.
    expect(second).to_have_attribute("data-status", "running", timeout=3 * TURN_TIMEOUT)
    message_id = second.get_attribute("id")

    samples, shot = [], False
    deadline = time.monotonic() + 6 * TURN_TIMEOUT / 1000
    while True:
        assert time.monotonic() < deadline, "the long answer did not complete"
        sample = page.evaluate(SECTIONS_JS, message_id)
        samples.append(sample)
        if sample["status"] == "completed":
            break
        if not shot and len(sample["sections"]) >= 5:
            screenshot(page, name="streaming")
            shot = True
        page.wait_for_timeout(100)

    expected = re.findall(r"^## (.+)$", answer, re.MULTILINE)
    final = samples[-1]["sections"]
    assert final == expected
    streaming = [s["sections"] for s in samples[:-1] if s["status"] == "running"]
    # Sections arrive in order while the turn runs, each once, never taken back.
    assert len({len(s) for s in streaming}) > 5
    for earlier, later in itertools.pairwise(streaming):
        assert later[: len(earlier)] == earlier
    for sections in streaming:
        assert sections == expected[: len(sections)]
    # The new conversation's page had the user's socket; the conversation's, one.
    sockets = [socket for socket in sockets if "/ws/conversations/" in socket.url]
    assert len(sockets) == 1 and not sockets[0].is_closed()
    screenshot(page, name="completed")
