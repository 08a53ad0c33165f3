"""What an open page is sent while a run streams: only what is new.

A websocket connection keeps a `RunStream` for each run it shows. A push folds
only the events after the last one the stream saw, then sends:

- the text appended since the last push: the markdown blocks it finished,
  rendered once and appended, and the unfinished block as plain text; or the
  whole answer when the text was replaced rather than extended (a tool call,
  a retry);
- the thinking the lead's model call streamed since, appended as text, or
  the thinking block whole when it closed (the answer began) or was replaced;
- the status line, when it changed;
- the list of steps, whole (it is short), when an event changed it;
- a snapshot of the whole message when anything else changed (status, a
  permission question, an error), and once more when the run ends, rendered
  from the stored answer.

Streamed text reaches a stream two ways: sent live by the worker as it comes
(realtime.RUN_DELTA, no database read), numbered by the llm_chunk row it will
be written in, and then in that row, of which only what was not sent live is
applied. A piece applies from where the stream is: a short row's pieces each
carry it from its start, so a page that opened after the row began shows its
text at the next piece. One that does not reach back that far (a piece of a
long row was lost, or rows came between) is left for its row, read at the
next wake-up.

Bytes and work per push are proportional to what is new, not to the answer so
far, so a 5,000-token answer costs about what its HTML weighs.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.template.loader import render_to_string
from django.utils import timezone

from agents import thread
from agents.models import Run, RunEvent
from agents.projection import RunView, run_view_apply, run_view_chunk
from artifactflow.markdown import BlockSplitter, LiveAnswer, live_answer, markdown_render
from conversations.models import Conversation


def _thinking_state(view: RunView) -> tuple:
    """Everything the thinking block shows besides its text: a change here
    sends the block whole, else the text it gained is appended."""
    block = view.thinking_block
    return (block.live, block.summary, block.cut) if block else ()


def _frame(view: RunView) -> tuple:
    """Everything a message shows besides its text and status line: a change
    here re-renders the message."""
    return (view.status, view.pending and view.pending.id, view.error, view.demo, view.model, view.model_label)


@dataclass
class RunStream:
    """One connection's view of one run: what the page was last sent."""

    run_id: int
    message_id: int
    view: RunView
    shown: str = ""
    activity: str = ""
    # The steps as of this event's fold (StepFold.changed_seq).
    steps_seq: int = 0
    frame: tuple = ()
    splitter: BlockSplitter = field(default_factory=BlockSplitter)
    # The thinking the page shows (its shown part) and the block's state.
    thinking: str = ""
    thinking_state: tuple = ()
    # The row streamed text was sent live for before it was written, and how
    # much of its content and reasoning the view has from those pieces.
    live_seq: int = 0
    live_at: tuple[int, int] = (0, 0)
    # A page the conversation is shared with: its snapshots have no controls.
    read_only: bool = False

    def show(self, view: RunView, answer: LiveAnswer) -> None:
        """Record that the page now shows this whole message, its answer as `answer`."""
        self.view, self.shown, self.activity, self.frame = view, view.text, view.activity, _frame(view)
        self.steps_seq = view.fold.changed_seq
        self.splitter = answer.splitter
        self.thinking_show(view)

    def thinking_show(self, view: RunView) -> None:
        block = view.thinking_block
        self.thinking, self.thinking_state = (block.shown if block else ""), _thinking_state(view)


def stream_open(*, conversation: Conversation, run_id: int, read_only: bool = False) -> tuple[RunStream | None, str]:
    """A snapshot of the run's message, and a stream to follow it with while
    the run is active (None once it has ended, or if it is not this
    conversation's). `read_only`: for a page it is shared with."""
    entry = thread.thread_entry_for_run(conversation=conversation, run_id=run_id)
    if entry is None:
        return None, ""
    html = _message_html(entry, read_only=read_only)
    if not entry.view.is_active:
        return None, html
    stream = RunStream(run_id=run_id, message_id=entry.message.pk, view=entry.view, read_only=read_only)
    stream.show(entry.view, entry.answer)
    return stream, html


def stream_advance(
    *, conversation: Conversation, stream: RunStream, read: bool = True, deltas: Sequence[dict] = ()
) -> tuple[RunStream | None, str]:
    """What is new for this page since the stream's last push, as HTML to send,
    and the stream to continue with (None once the run has ended). `read`:
    rows were written (a wake-up), read them; `deltas`: streamed text sent
    live, in the order sent."""
    view = stream.view
    if deltas and deltas[0]["seq"] > view.seq + 1:
        # Rows came before these pieces that this stream has not read yet.
        read = True
    if read:
        status = Run.objects.filter(pk=stream.run_id).values_list("status", flat=True).first()
        if status not in Run.ACTIVE_STATUSES:
            # The end (or a deleted run): the stored answer, rendered once.
            return stream_open(conversation=conversation, run_id=stream.run_id, read_only=stream.read_only)
        for event in RunEvent.objects.filter(run_id=stream.run_id, seq__gt=view.seq).order_by("seq"):
            run_view_apply(view, _unseen_part(stream, event))
        # The run row is the authority on status; events only fill in progress.
        view.status = status
    for delta in deltas:
        _delta_apply(stream, delta)
    if _frame(view) != stream.frame:
        entry = thread.thread_entry_for_message(conversation=conversation, message_id=stream.message_id, view=view)
        html = _message_html(entry, read_only=stream.read_only)
        stream.show(view, entry.answer)
        return stream, html
    parts = []
    if not view.text.startswith(stream.shown) and not _stripped_of(view.text, stream.shown):
        answer = live_answer(view.text)
        parts.append(_render("answer", message_id=stream.message_id, answer=answer, oob=True))
        # Only the answer was sent: the status line and steps below still compare.
        stream.shown, stream.splitter = view.text, answer.splitter
    elif len(view.text) > len(stream.shown):
        parts.append(_appended(stream, view.text))
    parts.append(_thinking_pushed(stream, view))
    if view.fold.changed_seq != stream.steps_seq:
        stream.steps_seq = view.fold.changed_seq
        parts.append(
            render_to_string(
                "live/steps.html#steps",
                {"message_id": stream.message_id, "view": view, "read_only": stream.read_only, "oob": True},
            )
        )
    if view.activity != stream.activity:
        stream.activity = view.activity
        parts.append(_render("activity", message_id=stream.message_id, view=view, read_only=stream.read_only, oob=True))
    return stream, "".join(parts)


def _stripped_of(text: str, shown: str) -> bool:
    """Whether `text` is what the page shows less trailing whitespace: a model
    call's stored content is its streamed text stripped, and the page then
    shows the same answer, so nothing is sent again."""
    return shown.startswith(text) and not shown[len(text) :].strip()


def _unseen_part(stream: RunStream, event: RunEvent) -> RunEvent:
    """The event, less the streamed text the stream had from it sent live."""
    if event.seq != stream.live_seq:
        return event
    content, reasoning = stream.live_at
    stream.live_seq, stream.live_at = 0, (0, 0)
    if event.type != RunEvent.Type.LLM_CHUNK:
        return event
    data = event.data
    rest = {"content": data.get("content", "")[content:], "reasoning": data.get("reasoning", "")[reasoning:]}
    return RunEvent(
        run_id=event.run_id, seq=event.seq, type=event.type, agent=event.agent, data=rest, created_at=event.created_at
    )


def _delta_apply(stream: RunStream, delta: dict) -> None:
    """Streamed text sent live, applied from where the stream is when the
    piece covers that point: it follows on what the stream has, or repeats
    its row from an earlier point (agents.events.LIVE_WHOLE_ROW_CHARS)."""
    if delta["seq"] != stream.view.seq + 1:
        return
    if delta["seq"] != stream.live_seq:
        stream.live_seq, stream.live_at = delta["seq"], (0, 0)
    (content_at, reasoning_at), (content_have, reasoning_have) = delta["at"], stream.live_at
    content, reasoning = delta["content"], delta["reasoning"]
    if not (content_at <= content_have <= content_at + len(content)) or not (
        reasoning_at <= reasoning_have <= reasoning_at + len(reasoning)
    ):
        return
    content, reasoning = content[content_have - content_at :], reasoning[reasoning_have - reasoning_at :]
    if content or reasoning:
        run_view_chunk(stream.view, agent=delta["agent"], content=content, reasoning=reasoning, at=timezone.now())
    stream.live_at = (content_have + len(content), reasoning_have + len(reasoning))


def _thinking_pushed(stream: RunStream, view: RunView) -> str:
    """The thinking block whole when it opened, closed or was replaced; else
    the thinking it gained, appended; else nothing. What is shown of it is
    bounded (Thinking.shown), so neither grows without end."""
    block = view.thinking_block
    shown = block.shown if block else ""
    if _thinking_state(view) == stream.thinking_state and shown.startswith(stream.thinking):
        more = shown[len(stream.thinking) :]
        stream.thinking = shown
        return _render_thinking("thinking_more", message_id=stream.message_id, more=more) if more else ""
    stream.thinking_show(view)
    return _render_thinking("thinking", message_id=stream.message_id, thinking=block, oob=True)


def _appended(stream: RunStream, text: str) -> str:
    done_before = stream.splitter.done
    done = stream.splitter.advance(text)
    new_text = text[len(stream.shown) :]
    stream.shown = text
    if done == done_before:
        return _render("answer_more", message_id=stream.message_id, tail=new_text)
    blocks = markdown_render(text[done_before:done])
    return _render("answer_more", message_id=stream.message_id, blocks=blocks, tail=text[done:])


def _message_html(entry: thread.ThreadEntry, *, read_only: bool) -> str:
    return render_to_string("live/turn.html#turn", {"entry": entry, "oob": True, "read_only": read_only})


def _render(partial: str, **context) -> str:
    return render_to_string(f"live/turn.html#{partial}", context)


def _render_thinking(partial: str, **context) -> str:
    return render_to_string(f"live/thinking.html#{partial}", context)
