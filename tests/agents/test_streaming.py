import lxml.html
import pytest

from agents.models import Run, RunEvent
from agents.streaming import stream_advance, stream_open
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(user):
    """A conversation whose run's events the test writes as a worker would."""
    conversation = ConversationFactory(owner=user)
    message = MessageFactory(conversation=conversation)
    run = RunFactory(message=message, status=Run.Status.RUNNING)
    return conversation, message, run


def _write(run, type, agent="lead_agent", **data):
    seq = run.events.count() + 1
    RunEvent.objects.create(run=run, seq=seq, type=type, agent=agent, data=data)


def _by_id(html: str) -> dict[str, lxml.html.HtmlElement]:
    """The pushed fragments, by the id each swaps out of band."""
    fragments = [f for f in lxml.html.fragments_fromstring(html) if not isinstance(f, str)] if html.strip() else []
    return {fragment.get("id"): fragment for fragment in fragments}


def _lines(steps) -> list[str]:
    return [" ".join(li.text_content().split()) for li in steps.xpath("./li")]


@pytest.mark.events_by_hand
def test_a_push_sends_the_steps_when_an_event_changed_them_and_only_then(running):
    conversation, message, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="Take notes")
    stream, html = stream_open(conversation=conversation, run_id=run.pk)
    assert _by_id(html)[f"message-{message.pk}"].get_element_by_id(f"steps-{message.pk}").get("hidden") is not None

    _write(run, "tool_start", tool="create_artifact", params={"id": "notes", "title": "Notes", "content": "…"})
    stream, started = stream_advance(conversation=conversation, stream=stream)
    _write(
        run,
        "tool_complete",
        tool="create_artifact",
        success=True,
        result='<artifact version="1"><id>notes</id>Created.</artifact>',
        artifact_change={"artifact_id": "notes", "title": "Notes", "version": 1},
    )
    stream, finished = stream_advance(conversation=conversation, stream=stream)
    _write(run, "llm_chunk", content="Noted.")
    stream, writing = stream_advance(conversation=conversation, stream=stream)
    stream, idle = stream_advance(conversation=conversation, stream=stream)

    steps = f"steps-{message.pk}"
    assert _by_id(started)[steps].get("hx-swap-oob") == "true"
    assert _lines(_by_id(started)[steps]) == ["lead_agent create_artifact “Notes” working"]
    assert _lines(_by_id(finished)[steps])[0].startswith("lead_agent create_artifact “Notes” ")
    # Text alone changes no step: the list is not sent again.
    assert steps not in writing and f"tail-{message.pk}" in writing
    assert idle == ""


@pytest.mark.events_by_hand
def test_a_tool_call_that_replaces_the_leads_text_still_sends_its_step_and_status_line(running):
    conversation, message, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="Take notes")
    _write(run, "llm_chunk", content="I'll write the notes first.")
    stream, _ = stream_open(conversation=conversation, run_id=run.pk)

    _write(run, "tool_start", tool="create_artifact", params={"id": "notes", "title": "Notes", "content": "…"})
    stream, html = stream_advance(conversation=conversation, stream=stream)

    pushed = _by_id(html)
    assert pushed[f"answer-{message.pk}"].text_content().strip() == ""
    assert _lines(pushed[f"steps-{message.pk}"]) == ["lead_agent create_artifact “Notes” working"]
    assert pushed[f"activity-{message.pk}"].text_content() == "lead_agent · writing “Notes”…"


def test_the_model_that_answers_shows_as_soon_as_the_turn_starts(running):
    """A queued run names no model yet; its first event names the lead's, and
    the message is sent again with it."""
    conversation, message, run = running
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)
    stream, html = stream_open(conversation=conversation, run_id=run.pk)
    assert 'class="answer-model"' not in html

    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    _write(
        run,
        "metadata",
        "",
        conversation_id=str(conversation.pk),
        message_id=message.pk,
        run_id=run.pk,
        model="fast-model",
        model_label="快速 Fast",
        demo=False,
    )
    stream, started = stream_advance(conversation=conversation, stream=stream)

    shown = _by_id(started)[f"message-{message.pk}"]
    assert [p.text_content() for p in shown.find_class("answer-model")] == ["Model: 快速 Fast"]
