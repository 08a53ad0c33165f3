import lxml.html
import pytest

from agents.models import Run, RunEvent
from live.streaming import stream_advance, stream_open
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


@pytest.mark.events_by_hand
def test_the_leads_thinking_streams_open_in_the_answer_and_folds_away_once_it_answers(running):
    conversation, message, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="WAL 是什么？")
    stream, html = stream_open(conversation=conversation, run_id=run.pk)
    fold = f"thinking-{message.pk}"
    # An empty fold waits, hidden, for the thinking to come.
    assert _by_id(html)[f"message-{message.pk}"].get_element_by_id(fold).get("hidden") is not None

    _write(run, "llm_chunk", content="", reasoning="先想想 <b>WAL</b>")
    stream, started = stream_advance(conversation=conversation, stream=stream)
    _write(run, "llm_chunk", content="", reasoning=" 的定义。")
    stream, more = stream_advance(conversation=conversation, stream=stream)
    _write(run, "llm_chunk", content="WAL 是预写日志。")
    stream, answering = stream_advance(conversation=conversation, stream=stream)

    opened = _by_id(started)[fold]
    assert opened.get("open") is not None and opened.get("hidden") is None
    assert opened.xpath("./summary")[0].text_content() == "Thinking…"
    # Plain text: what the model wrote in its thinking is never markup.
    assert opened.get_element_by_id(f"thinking-text-{message.pk}").text_content() == "先想想 <b>WAL</b>"
    assert not opened.xpath(".//b")
    # Then only the thinking gained, appended.
    appended = _by_id(more)[f"thinking-text-{message.pk}"]
    assert appended.get("hx-swap-oob") == "beforeend" and appended.text_content() == " 的定义。"
    assert fold not in more
    closed = _by_id(answering)[fold]
    assert closed.get("open") is None and closed.xpath("./summary")[0].text_content().startswith("Thought for ")
    assert closed.text_content().count("先想想 <b>WAL</b> 的定义。") == 1
    assert f"tail-{message.pk}" in answering


@pytest.mark.events_by_hand
def test_a_long_thinking_is_shown_cut_and_the_page_is_sent_no_more_of_it(running):
    conversation, _, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="Think hard")
    stream, _ = stream_open(conversation=conversation, run_id=run.pk)
    pushed = []
    for _ in range(12):
        _write(run, "llm_chunk", content="", reasoning="想" * 10_000)
        stream, html = stream_advance(conversation=conversation, stream=stream)
        pushed.append(html)

    # Once cut, the block is sent whole once more with its note, and then nothing.
    sent = "".join(pushed)
    assert sent.count("想") == 40_000
    assert "Only the first 20,000 characters of the thinking are shown." in pushed[2]
    assert pushed[3:] == [""] * 9


@pytest.mark.events_by_hand
def test_a_tool_call_folds_the_thinking_into_the_activity_and_the_next_call_thinks_afresh(running):
    conversation, message, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="Take notes")
    _write(run, "llm_chunk", content="", reasoning="先记笔记。")
    stream, _ = stream_open(conversation=conversation, run_id=run.pk)

    _write(run, "llm_complete", content="", reasoning="先记笔记。", tool_calls=[], token_usage=None, duration_ms=5)
    _write(run, "tool_start", tool="read_artifact", params={"id": "notes"})
    stream, tool = stream_advance(conversation=conversation, stream=stream)
    _write(run, "llm_chunk", content="", reasoning="笔记读完了。")
    stream, again = stream_advance(conversation=conversation, stream=stream)

    fold = f"thinking-{message.pk}"
    assert _by_id(tool)[fold].get("hidden") is not None
    assert _by_id(again)[fold].text_content().strip().endswith("笔记读完了。")
    assert "先记笔记" not in again


@pytest.mark.events_by_hand
def test_a_finished_answer_keeps_its_thinking_folded_away(running):
    conversation, message, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="WAL?")
    _write(
        run,
        "llm_complete",
        content="",
        reasoning="Step one.",
        tool_calls=[],
        token_usage=None,
        duration_ms=5,
        reasoning_ms=1200,
    )
    _write(run, "tool_start", tool="read_artifact", params={"id": "notes"})
    _write(run, "tool_complete", tool="read_artifact", success=True, result="…", truncated=False, duration_ms=1)
    _write(
        run,
        "llm_complete",
        content="WAL 是预写日志。",
        reasoning="可以回答了 <script>x()</script>",
        tool_calls=[],
        token_usage=None,
        duration_ms=9,
        reasoning_ms=3400,
    )
    run.status = Run.Status.COMPLETED
    run.save()
    message.response = "WAL 是预写日志。"
    message.save()

    stream, html = stream_open(conversation=conversation, run_id=run.pk)

    assert stream is None
    fold = _by_id(html)[f"message-{message.pk}"].get_element_by_id(f"thinking-{message.pk}")
    assert fold.get("open") is None and fold.get("hidden") is None
    assert fold.xpath("./summary")[0].text_content() == "Thought for 3.4 s"
    # The thinking of the call that wrote the answer, as text.
    assert fold.text_content().strip().endswith("可以回答了 <script>x()</script>") and "<script" not in html


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


def _delta(seq, at, content="", reasoning="", agent="lead_agent"):
    return {"seq": seq, "agent": agent, "at": list(at), "content": content, "reasoning": reasoning}


def _answer_text(stream) -> str:
    return stream.view.text


def _answering(running):
    """The conversation, its run with the lead answering (rows 1 and 2), and a stream opened on it."""
    conversation, _, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="Answer")
    stream, _ = stream_open(conversation=conversation, run_id=run.pk)
    return conversation, run, stream


@pytest.mark.events_by_hand
def test_text_sent_live_shows_before_its_row_and_the_row_adds_only_the_rest(running):
    conversation, run, stream = _answering(running)

    stream, html = stream_advance(
        conversation=conversation,
        stream=stream,
        read=False,
        deltas=[_delta(3, (0, 0), "WAL lets ", "Think"), _delta(3, (9, 5), "readers ", "ing.")],
    )
    assert _answer_text(stream) == "WAL lets readers "
    assert "WAL lets readers" in html and stream.view.thinking == "Thinking."
    # The row holds all of it, and a last piece the page was not sent live.
    _write(run, "llm_chunk", content="WAL lets readers run.", reasoning="Thinking.")
    stream, html = stream_advance(conversation=conversation, stream=stream)

    assert _answer_text(stream) == "WAL lets readers run."
    assert stream.view.thinking == "Thinking."
    assert "run." in html and "readers" not in html


@pytest.mark.events_by_hand
def test_a_lost_piece_is_read_from_its_row_and_nothing_is_shown_twice(running):
    conversation, run, stream = _answering(running)

    # The piece at 0 was lost: those after it wait for the row.
    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(3, (4, 0), "two ")]
    )
    assert _answer_text(stream) == "" and "two" not in html
    _write(run, "llm_chunk", content="one two ")
    # A piece of the next row, sent before the wake-up of this one: the rows come first.
    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(4, (0, 0), "three ")]
    )
    assert _answer_text(stream) == "one two three "
    _write(run, "llm_chunk", content="three four")
    stream, html = stream_advance(conversation=conversation, stream=stream)
    assert _answer_text(stream) == "one two three four"
    # Pieces already in rows the stream has read change nothing.
    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(4, (0, 0), "three ")]
    )
    assert _answer_text(stream) == "one two three four" and html == ""


@pytest.mark.events_by_hand
def test_a_page_opened_after_its_row_began_shows_the_row_from_the_next_piece_that_repeats_it(running):
    # Opened after the first pieces of row 3 were sent.
    conversation, run, stream = _answering(running)

    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(3, (0, 0), "预写式日志让", "想")]
    )
    assert _answer_text(stream) == "预写式日志让" and "预写式日志让" in html
    # The next piece repeats the row so far: only what is new is shown.
    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(3, (0, 0), "预写式日志让读者", "想")]
    )
    assert _answer_text(stream) == "预写式日志让读者" and stream.view.thinking == "想"
    assert "读者" in html and "日志" not in html
    # A piece that starts beyond what the stream has waits for its row.
    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(3, (10, 1), "并行")]
    )
    assert _answer_text(stream) == "预写式日志让读者" and html == ""
    _write(run, "llm_chunk", content="预写式日志让读者与写者并行", reasoning="想")
    stream, html = stream_advance(conversation=conversation, stream=stream)
    assert _answer_text(stream) == "预写式日志让读者与写者并行"
    assert "与写者并行" in html and "读者" not in html


@pytest.mark.events_by_hand
def test_a_page_that_first_sees_thinking_and_answer_together_does_not_time_the_thinking(running):
    conversation, run, stream = _answering(running)
    fold = f"thinking-{running[1].pk}"

    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(3, (0, 0), "热泵在冬天", "先想想效率")]
    )
    # Not "Thought for 0 ms": how long it thought is not known yet.
    assert _by_id(html)[fold].xpath("./summary")[0].text_content() == "Thinking"
    # The call's end says how long, as the engine measured it.
    _write(run, "llm_complete", content="热泵在冬天取热。", reasoning="先想想效率", reasoning_ms=1200)
    stream, html = stream_advance(conversation=conversation, stream=stream)
    assert _by_id(html)[fold].xpath("./summary")[0].text_content() == "Thought for 1.2 s"


@pytest.mark.events_by_hand
def test_a_subagents_streamed_text_sent_live_is_not_the_answer(running):
    conversation, _, run = running
    _write(run, "metadata", "", model="m")
    stream, _ = stream_open(conversation=conversation, run_id=run.pk)

    stream, html = stream_advance(
        conversation=conversation, stream=stream, read=False, deltas=[_delta(2, (0, 0), "notes", agent="search_agent")]
    )
    assert _answer_text(stream) == "" and "notes" not in html


@pytest.mark.events_by_hand
def test_the_end_of_a_model_call_stripping_the_streamed_text_sends_nothing_again(running):
    # The call's stored content is its text stripped: read before the run's
    # status changes, it must not resend the whole answer (a 5,000-token
    # answer would be sent twice).
    conversation, message, run = running
    _write(run, "metadata", "", model="m")
    _write(run, "agent_start", instruction="Answer")
    _write(run, "llm_chunk", content="## 读者与写者\n\nWAL lets readers run beside one writer.\n")
    stream, _ = stream_open(conversation=conversation, run_id=run.pk)

    _write(run, "llm_complete", content="## 读者与写者\n\nWAL lets readers run beside one writer.")
    stream, html = stream_advance(conversation=conversation, stream=stream)
    assert f"answer-{message.pk}" not in html and "WAL" not in html

    # Text that then changes for real is still sent whole.
    _write(run, "tool_start", tool="create_artifact", params={"id": "notes", "title": "Notes", "content": "…"})
    stream, html = stream_advance(conversation=conversation, stream=stream)
    assert _by_id(html)[f"answer-{message.pk}"].text_content().strip() == ""
