"""The composer's model picker: a person chooses the lead agent's model from
the models file's [lead] choices, the worker asks the model service for that
model, and the answer names it. A model outside the list is refused, the
draft kept."""

import re

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from tests.conftest import LEAD_MODELS
from tests.e2e.conftest import portal_running
from tests.e2e.test_first_turn import TURN_TIMEOUT, sign_in
from tests.model_server import Text

CONVERSATION_URL = re.compile(r"/c/[0-9a-f-]{36}/$")
COMPOSER_PARTS = ["#composer-model-select", "#composer-input", "#composer-actions button"]
# The parts not (or not yet) inside the composer's width: the socket's first
# push swaps the composer's actions in again as it connects.
PARTS_OUTSIDE_JS = """(parts) => {
  const composer = document.getElementById("composer").getBoundingClientRect();
  return parts.filter((part) => {
    const box = document.querySelector(part)?.getBoundingClientRect();
    return !box || box.left < composer.left || box.right > composer.right;
  });
}"""


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory):
    """A portal of this module's own whose models file offers two lead models,
    both served by its scripted model (they have no base_url of their own)."""
    data_dir = tmp_path_factory.mktemp("portal-picker")
    models = data_dir / "models.toml"
    models.write_text(LEAD_MODELS)
    with portal_running(
        template=portal_template, data_dir=data_dir, extra_env={"ARTIFACTFLOW_MODELS_FILE": str(models)}
    ) as running:
        yield running


def _send(page, *, question: str, model: str) -> None:
    page.get_by_label("Model", exact=True).select_option(model)
    page.locator("#composer-input").fill(question)
    page.get_by_role("button", name="Send").click()


def _answered(page, *, text: str):
    turn = page.locator("article.turn").last
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turn.locator(".answer")).to_contain_text(text)
    return turn


def test_the_model_chosen_in_the_composer_answers_and_the_answer_names_it(portal, model_server, page):
    sign_in(page, portal=portal, user=portal.users[0])
    picker = page.get_by_label("Model", exact=True)
    expect(picker).to_have_value("deep")
    expect(picker.locator("option")).to_have_text(["深度思考 Deep · thinks before answering", "快速 Fast"])

    # The second configured model, for a new conversation's first question.
    model_server.add(Text("热泵在零下十五度仍能供暖。"))
    _send(page, question="空气源热泵在严寒地区能用吗？", model="fast")
    page.wait_for_url(CONVERSATION_URL)
    turn = _answered(page, text="热泵在零下十五度仍能供暖。")
    expect(turn.locator(".answer-model")).to_have_text("Model: 快速 Fast")
    assert [request["model"] for request in model_server.requests] == ["fast-model"]
    # The conversation keeps it.
    expect(picker).to_have_value("fast")

    # Back to the thinking model: the composer, emptied, still shows the choice just sent.
    model_server.add(Text("能效系数约为二。"))
    _send(page, question="那能效系数是多少？", model="deep")
    turn = _answered(page, text="能效系数约为二。")
    expect(turn.locator(".answer-model")).to_have_text("Model: 深度思考 Deep")
    expect(page.locator("#composer-input")).to_have_value("")
    expect(picker).to_have_value("deep")
    assert [request["model"] for request in model_server.requests] == ["fast-model", "deep-model"]
    page.reload()
    expect(page.get_by_label("Model", exact=True)).to_have_value("deep")
    expect(page.locator(".answer-model")).to_have_text(["Model: 快速 Fast", "Model: 深度思考 Deep"])


def test_a_model_outside_the_list_is_refused_and_the_draft_kept(portal, model_server, page):
    sign_in(page, portal=portal, user=portal.users[0])
    # What a crafted request sends: a name the list does not offer.
    page.locator("#composer-model-select option[value='fast']").evaluate("option => option.value = 'gpt-5-huge'")
    page.get_by_label("Model", exact=True).select_option("gpt-5-huge")
    page.locator("#composer-input").fill("我的草稿：用最贵的模型")
    page.get_by_role("button", name="Send").click()

    expect(page.locator("#composer-error")).to_have_text("That model cannot be chosen here. Choose one from the list.")
    expect(page.locator("#composer-input")).to_have_value("我的草稿：用最贵的模型")
    assert page.url == f"{portal.base_url}/" and model_server.requests == []


@pytest.mark.parametrize("width", [1366, 390])
def test_the_picker_fits_the_composer(portal, model_server, new_page, screenshot, width):
    page = new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
    sign_in(page, portal=portal, user=portal.users[0])
    # A new conversation offers the default, the thinking model, under its longest label.
    _fits_and_shot(page, screenshot, name=f"{width}-new")
    model_server.add(Text("家用储能电池一般可循环六千次。"))
    _send(page, question="家用储能电池能用多久？", model="fast")
    page.wait_for_url(CONVERSATION_URL)
    _answered(page, text="家用储能电池一般可循环六千次。")
    _fits_and_shot(page, screenshot, name=f"{width}-answered")


def _fits_and_shot(page, screenshot, *, name: str) -> None:
    """The picker, the box and the button inside the composer, in light and dark, each shot."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        try:
            page.wait_for_function(f"(parts) => ({PARTS_OUTSIDE_JS})(parts).length === 0", arg=COMPOSER_PARTS)
        except PlaywrightTimeoutError:
            raise AssertionError(f"outside the composer: {page.evaluate(PARTS_OUTSIDE_JS, COMPOSER_PARTS)}") from None
        screenshot(page, name=f"{name}-{scheme}")
