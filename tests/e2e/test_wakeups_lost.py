"""A page whose every wake-up from the worker is lost (a web process the
worker cannot reach) still shows a question's turn run and end: the page names
the turn it added, and its socket reads a turn nobody wakes it for every
WEBSOCKET_QUIET_RUN_SECONDS. On a portal of its own, whose web process's
socket for wake-ups (live.layer) the test takes away."""

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.e2e.conftest import portal_running
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(settings.REDIS_URL),
        reason="takes away the embedded layer's sockets; a Redis layer's outage is tested on a Redis of its own",
    ),
]


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory):
    with portal_running(template=portal_template, data_dir=tmp_path_factory.mktemp("portal-unwoken")) as running:
        yield running


def test_a_turn_whose_wake_ups_are_all_lost_still_shows_running_and_ends(portal, model_server, page):
    model_server.add(Text("先回答第一个问题。"))
    # Streamed for about eight seconds: long enough for the page's quiet reads to see it run.
    model_server.add(Text("第二个回答慢慢到来，" * 40, chunk_size=5, delay=0.1))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="第一个问题？")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    # The worker finds no web process to wake from now on.
    sockets = list((Path(portal.env["ARTIFACTFLOW_DATA_DIR"]) / "live").glob("*.sock"))
    assert sockets
    for path in sockets:
        path.unlink()

    page.locator("#composer-input").fill("第二个问题？")
    page.get_by_role("button", name="Send").click()
    second = page.locator("article.turn").nth(1)
    expect(second).to_have_attribute("data-status", "running", timeout=3 * TURN_TIMEOUT)
    expect(second).to_have_attribute("data-status", "completed", timeout=3 * TURN_TIMEOUT)
    expect(second.locator(".answer")).to_contain_text("第二个回答慢慢到来，" * 40)
