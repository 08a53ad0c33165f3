"""A conversation's title, proposed by its model after the first turn, reaches the open page."""

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import portal_running
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory):
    """A portal of this module's own, whose worker asks the model for titles."""
    with portal_running(
        template=portal_template,
        data_dir=tmp_path_factory.mktemp("portal-titles"),
        extra_env={"ARTIFACTFLOW_MODEL_TITLES": "1"},
    ) as running:
        yield running


def test_the_models_title_replaces_the_question_in_the_head(portal, model_server, page, screenshot):
    model_server.add(Text("热泵在零下十五度仍能供暖。"), Text("《严寒地区的空气源热泵》"))
    sign_in(page, portal=portal, user=portal.users[0])

    ask(page, question="空气源热泵在严寒地区能用吗？冬天零下二十度的时候效率怎么样？")

    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(page.locator("#conversation-title")).to_have_text("严寒地区的空气源热泵", timeout=TURN_TIMEOUT)
    screenshot(page, name="titled")
    page.reload()
    expect(page.locator("#conversation-title")).to_have_text("严寒地区的空气源热泵")
    expect(page.locator("#conversation-list")).to_contain_text("严寒地区的空气源热泵")
    assert model_server.requests[1]["messages"][0]["content"].startswith("You name conversations.")
