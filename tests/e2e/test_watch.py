"""The live watch catches what a person would have seen go wrong mid-stream,
and stays quiet about a turn that streams as it should."""

import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.e2e.watch import watch_start
from tests.model_server import Text

pytestmark = pytest.mark.e2e

QUESTION = "热泵在零下十五度还能供暖吗？"
THOUGHT = "".join(f"第{n}步：比较严寒中的能效。 " for n in range(1, 41))
ANSWER = "能。寒冷地区的热泵在零下十五度仍能供暖，能效约为二。"


@pytest.fixture
def watched(browser):
    """A page watched, but not checked when the test ends: these tests look at what the watch found."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    yield page, watch_start(page)
    context.close()


def _thinking_turn(page, *, portal, model_server) -> None:
    model_server.add(Text(ANSWER, reasoning=THOUGHT, chunk_size=6, delay=0.03))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question=QUESTION)


def test_a_turn_that_streams_as_it_should_breaks_no_invariant(portal, model_server, watched):
    page, watch = watched
    _thinking_turn(page, portal=portal, model_server=model_server)
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    watch.reload_matches(status="completed")
    assert watch.violations() == []
    # It looked while the turn ran, not only at the end.
    assert any(
        turn["status"] == "running" and turn["question"] == QUESTION for s in watch.samples for turn in s["turns"]
    )


def test_the_watch_catches_a_running_turn_swapped_away(portal, model_server, watched):
    """The defect a thinking model's first users saw, made on purpose: mid-stream,
    a swap puts the turn's Activity where the turn was."""
    page, watch = watched
    # About ten seconds of thinking: the swap lands while the turn still runs.
    model_server.add(Text(ANSWER, reasoning=THOUGHT, chunk_size=2, delay=0.05))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question=QUESTION)
    turn = page.locator("article.turn").first
    expect(turn.locator(".thinking-text")).to_contain_text("第2步", timeout=TURN_TIMEOUT)
    page.evaluate(
        """() => htmx.swap(document.querySelector("article.turn"),
          '<div class="activity-log">No agent activity yet</div>', {swapStyle: "outerHTML"})"""
    )
    expect(page.locator("article.turn")).to_have_count(0)
    page.evaluate("() => 0")
    assert any(f"the running turn of {QUESTION!r} is gone; the page shows []" in v for v in watch.violations()), (
        watch.violations()
    )


def test_the_watch_catches_a_swap_with_no_target(portal, model_server, watched):
    page, watch = watched
    _thinking_turn(page, portal=portal, model_server=model_server)
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    assert watch.violations() == []
    # A push for an element the page does not have, as a template that lost an id would send.
    page.evaluate(
        """() => htmx.swap(document.body, '<div id="nowhere" hx-swap-oob="true">!</div>', {swapStyle: "none"})"""
    )
    # The report came in before evaluate's answer, on the same connection.
    assert any(v.startswith("htmx:oobErrorNoTarget at #nowhere on /c/") for v in watch.violations()), watch.violations()
