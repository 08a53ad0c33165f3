"""Model conformance through the page: every shape OpenAI-compatible services
stream (thinking inline or beside the answer under either name, chunks without
choices, no usage, parallel and text-written tool calls, an answer cut at its
output limit mid-call, an error event, a very long thinking) is watched live
with a thinking lead model (LEAD_MODELS: `thinking = true`). At every look the
question is there, the thinking stays in its fold apart from the answer, the
answer streams, and the end is what a reload shows."""

import json
import re
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import expect

from tests.conftest import LEAD_MODELS
from tests.e2e.conftest import SCREENSHOTS, SCREENSHOTS_TAKEN, portal_running, screenshot_save
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import StreamError, Text, ToolCalls

pytestmark = pytest.mark.e2e

# Beside the other browser tests' screenshots, in the repository's test-artifacts/.
SHOTS = SCREENSHOTS / "model-shapes"
QUESTION = "Can an air-source heat pump heat a house at -15 °C?"
# Long enough to be watched growing, short enough to keep the test quick.
THOUGHT = "".join(f"Step {n}: weigh the pump's efficiency in deep cold. " for n in range(1, 11))
ANSWER = (
    "Yes, a cold-climate heat pump still heats at -15 °C. "
    "Its efficiency falls to about two, so it gives twice the heat of the power it draws. "
    "Size it for the coldest week."
)
LAST_WORDS = "coldest week."
# OpenAI's reasoning, 20,000 tokens of it as the model server counts (four characters a token).
LONG_THOUGHT = "".join(f"Step {n}: check the heating load against the pump's curve once more. " for n in range(1, 1201))
LONG_LAST_STEP = "Step 1200:"
NOTES = {"id": "cold-notes", "content": "# Cold climate\n\nEfficiency about two at -15 °C."}
HERMES = (
    f"Let me note that first.\n<tool_call>\n{json.dumps({'name': 'create_artifact', 'arguments': NOTES})}\n</tool_call>"
)
# The timing a person could watch: about 2 s of thinking, 1 s of answer.
PACE = {"chunk_size": 5, "delay": 0.04}


@dataclass(frozen=True)
class Shape:
    replies: tuple
    status: str = "completed"
    thinking: str = THOUGHT
    answer: str = ANSWER
    error: str = ""
    # The tool call ran: its artifact is in the pane.
    artifact: bool = False
    shots: bool = False
    # Markers the thinking shows while it streams: an early one, then a later one.
    marks: tuple = ("Step 2:", "Step 6:")
    notes: list = field(default_factory=list)


SHAPES = {
    # DeepSeek-R1 and Qwen3 served without a reasoning parser: the tags in the text, cut between chunks.
    "think-tags-split": Shape((Text(f"<think>{THOUGHT}</think>\n\n{ANSWER}", **PACE),), shots=True),
    # A model that opened its thinking and never closed it: all of it is thinking, and no answer came.
    "think-unclosed": Shape(
        (Text(f"<think>{THOUGHT}", **PACE),),
        status="failed",
        answer="",
        error="The model thought but wrote no answer; its thinking is in the Activity.",
    ),
    "think-only": Shape(
        (Text(f"<think>{THOUGHT}</think>", **PACE),),
        status="failed",
        answer="",
        error="The model thought but wrote no answer; its thinking is in the Activity.",
    ),
    # DeepSeek's API, vLLM's and SGLang's reasoning parsers, LiteLLM.
    "reasoning_content": Shape((Text(ANSWER, reasoning=THOUGHT, **PACE),), shots=True),
    # vLLM's newer name, OpenRouter's and Ollama's.
    "reasoning": Shape((Text(ANSWER, reasoning=THOUGHT, reasoning_field="reasoning", **PACE),)),
    # Azure: a first chunk with no choices, a filter verdict with an empty delta, a usage-only last chunk.
    "empty-choices": Shape((Text(ANSWER, reasoning=THOUGHT, filter_chunks=True, **PACE),)),
    "usage-absent": Shape((Text(ANSWER, reasoning=THOUGHT, usage=False, **PACE),)),
    # Two calls at once, their pieces interleaved by index: the first runs, the model is told of the second.
    "parallel-tool-calls": Shape(
        (
            ToolCalls(
                [("create_artifact", NOTES), ("create_artifact", {"id": "second", "content": "Not run."})],
                reasoning=THOUGHT,
                interleaved=True,
                **PACE,
            ),
            Text(ANSWER, reasoning="Step 1: the notes are written. Step 2: answer now.", **PACE),
        ),
        artifact=True,
        marks=("Step 2:", "Step 6:"),
    ),
    # Qwen on vLLM without a tool parser: the call written in the text after the thinking.
    "hermes-tool-call": Shape(
        (
            Text(f"<think>{THOUGHT}</think>\n\n{HERMES}", **PACE),
            Text(ANSWER, reasoning="Step 1: the notes are written. Step 2: answer now.", **PACE),
        ),
        artifact=True,
    ),
    # The output limit reached while the call's arguments were being written.
    "length-mid-tool-call": Shape(
        (ToolCalls([("create_artifact", NOTES)], reasoning=THOUGHT, length_cut=30, **PACE),),
        status="failed",
        answer="",
        error="The model reached its output limit in the middle of a tool call",
    ),
    # The service reports a failure after the answer began.
    "error-mid-stream": Shape(
        (StreamError(ANSWER[:60], reasoning=THOUGHT, message="upstream provider overloaded", **PACE),),
        status="failed",
        answer=ANSWER[:60].strip(),
        error="The model service reported an error in the middle of its answer: upstream provider overloaded",
        shots=True,
    ),
    "thinking-20000-tokens": Shape(
        # Its thinking streams in about two seconds: the answer waits until the
        # page has been seen thinking, however busy the machine.
        (Text(ANSWER, reasoning=LONG_THOUGHT, chunk_size=1500, delay=0.04, hold=ANSWER[:20]),),
        thinking=LONG_THOUGHT,
        # The page shows the first 20,000 characters of it, as it streams and after.
        marks=("Step 30:", "Step 250:"),
    ),
}


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory):
    """A portal whose lead model is declared thinking (LEAD_MODELS), with
    native tool calls: the request offers the tools, as most services are used."""
    data_dir = tmp_path_factory.mktemp("portal-shapes")
    models = data_dir / "models.toml"
    models.write_text(LEAD_MODELS)
    with portal_running(
        template=portal_template,
        data_dir=data_dir,
        extra_env={"ARTIFACTFLOW_MODELS_FILE": str(models), "ARTIFACTFLOW_TOOL_MODE": "native"},
    ) as running:
        yield running


def _look(page, turn) -> None:
    """The running turn is still the question and its answer: nothing replaced it."""
    expect(turn.locator(".bubble.user")).to_have_text(QUESTION)
    expect(page.get_by_text("No agent activity yet")).to_have_count(0)


def _shots(page, *, name: str) -> None:
    if not SCREENSHOTS_TAKEN:
        return
    width = page.viewport_size["width"]
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        screenshot_save(page, path=SHOTS / f"{name}-{width}-{scheme}.png")
    page.emulate_media(color_scheme="light")


def _seen(turn) -> dict:
    """What the turn shows, in substance."""
    fold = turn.locator(".bubble.assistant > details.thinking:not([hidden])")
    shown = fold.count() == 1
    return {
        "status": turn.get_attribute("data-status"),
        "question": turn.locator(".bubble.user").inner_text(),
        "answer": turn.locator(".answer").first.inner_text().strip(),
        "thinking": fold.locator(".thinking-text").text_content().strip() if shown else "",
        "thinking_summary": fold.locator("summary").inner_text() if shown else "",
        "thinking_cut": fold.locator(".thinking-cut").count() if shown else 0,
        "errors": turn.locator("p.error").all_inner_texts(),
        "retry": turn.locator("form.retry button").count(),
    }


@pytest.mark.parametrize("name", list(SHAPES))
def test_a_stream_shape_shows_live_with_the_question_kept_and_ends_as_a_reload_shows_it(
    portal, model_server, page, name
):
    shape = SHAPES[name]
    model_server.add(*shape.replies)
    page.emulate_media(reduced_motion="reduce")
    page.set_viewport_size({"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question=QUESTION)

    turn = page.locator("article.turn").first
    fold = turn.locator("details.thinking").first
    thinking = fold.locator(".thinking-text")
    answer = turn.locator(".answer").first
    early, later = shape.marks
    # The thinking streams into its open fold, the answer still empty.
    expect(thinking).to_contain_text(early, timeout=TURN_TIMEOUT)
    expect(fold).to_have_attribute("open", "")
    assert turn.get_attribute("data-status") == "running"
    _look(page, turn)
    if shape.shots:
        _shots(page, name=f"{name}-thinking")
    # On the phone, mid-stream: the same turn, the thinking still growing.
    page.set_viewport_size({"width": 390, "height": 844})
    expect(thinking).to_contain_text(later, timeout=TURN_TIMEOUT)
    _look(page, turn)
    # A shape's answer held until now goes on (the others hold nothing).
    model_server.release()
    assert "<think>" not in thinking.text_content() and "</think>" not in thinking.text_content()
    assert early not in answer.inner_text()

    if shape.answer:
        # The answer streams: seen in part while the turn runs, the thinking folded away above it.
        first_words = shape.answer[:20]
        expect(answer).to_contain_text(first_words, timeout=TURN_TIMEOUT)
        _look(page, turn)
        if shape.status == "completed":
            partial = answer.inner_text()
            if LAST_WORDS not in partial:
                expect(fold).not_to_have_attribute("open", "")
            if shape.shots:
                _shots(page, name=f"{name}-answering")

    expect(turn).to_have_attribute("data-status", shape.status, timeout=TURN_TIMEOUT)
    _look(page, turn)
    seen = _seen(turn)
    # Thinking is never the answer, nor markup of any kind.
    assert seen["answer"] == shape.answer.strip() or (shape.answer and seen["answer"].startswith(shape.answer[:20]))
    for markup in ("<think>", "</think>", "<tool_call>", '"arguments"'):
        assert markup not in seen["answer"]
    if shape.status == "completed":
        # The thinking of the call that wrote the answer, whole, in its closed fold.
        assert seen["thinking"].startswith("Step 1:") and "Yes, a cold" not in seen["thinking"]
        assert re.match(r"Thought for \d", seen["thinking_summary"])
    else:
        # A failed turn shows no thinking as its answer's: what the model thought is in the Activity.
        assert seen["thinking"] == ""
    if shape.error:
        assert any(shape.error in error for error in seen["errors"]), seen["errors"]
        assert seen["retry"] == 1
        if shape.shots:
            _shots(page, name=f"{name}-failed")
            page.set_viewport_size({"width": 1366, "height": 900})
            _shots(page, name=f"{name}-failed")
            page.set_viewport_size({"width": 390, "height": 844})
    else:
        assert seen["errors"] == []
    if shape.artifact:
        # The first call ran; the second, of the same step, did not.
        expect(page.locator("#artifact-pane")).to_contain_text("Cold climate")
        expect(page.locator("#artifact-pane")).not_to_contain_text("Not run.")

    page.reload()
    turn = page.locator("article.turn").first
    expect(turn).to_have_attribute("data-status", shape.status)
    assert _seen(turn) == seen
