import contextlib
import re
from pathlib import Path

import pytest

from agents.events import LIVE_TURNS_AT_FULL_RATE, LIVE_WHOLE_ROW_CHARS, RunEventLog
from agents.lease import Heartbeat, Lease
from agents.models import Run, RunEvent
from artifactflow import realtime
from tests.factories import ConversationFactory, MessageFactory, RunFactory

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"

pytestmark = pytest.mark.django_db


def test_an_event_is_announced_to_its_conversation_with_what_the_doc_says_and_no_more(user, monkeypatch):
    sent = []
    monkeypatch.setattr(
        realtime, "group_send_on_commit", lambda *, group, type, **fields: sent.append((group, type, fields))
    )
    conversation = ConversationFactory(owner=user)
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    # The run's creation told its owner's pages (live.signals); the event is what is tested.
    sent.clear()

    RunEventLog(run=run).emit(RunEvent.Type.AGENT_START, agent="lead_agent", data={"instruction": "Take notes"})

    [(group, type, fields)] = sent
    assert (group, type, fields) == (
        realtime.conversation_group(conversation.pk),
        realtime.RUN_EVENT,
        {"run_id": run.pk, "seq": 1},
    )
    documented = re.search(r'`\{"type": "run\.event", ([^}]*)\}`', DOC.read_text(encoding="utf-8"))[1]
    assert [name.strip('"') for name in documented.split(", ")] == list(fields)


def test_the_leads_text_goes_to_pages_as_it_comes_numbered_by_the_row_it_will_be_written_in(
    user, monkeypatch, settings
):
    settings.RUN_CHUNK_FLUSH_SECONDS, settings.RUN_LIVE_SECONDS = 600, 0
    sent = []
    monkeypatch.setattr(realtime, "group_send_on_commit", lambda *, group, type, **fields: sent.append((type, fields)))
    run = RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=user)), status=Run.Status.RUNNING)
    log = RunEventLog(run=run)
    log.emit(RunEvent.Type.AGENT_START, agent="lead_agent", data={"instruction": "Answer"})

    log.chunk(agent="lead_agent", reasoning="想一想")
    log.chunk(agent="lead_agent", content="WAL ")
    log.chunk(agent="lead_agent", content="lets readers")
    log.chunk(agent="search_agent", content="a subagent's notes")
    log.flush_chunks()

    deltas = [fields for type, fields in sent if type == realtime.RUN_DELTA]
    # Each piece carries its row so far: a page that opened after the first still shows it all.
    assert [(d["seq"], d["at"], d["content"], d["reasoning"]) for d in deltas] == [
        (2, [0, 0], "", "想一想"),
        (2, [0, 0], "WAL ", "想一想"),
        (2, [0, 0], "WAL lets readers", "想一想"),
    ]
    rows = list(run.events.filter(type=RunEvent.Type.LLM_CHUNK).order_by("seq").values_list("seq", "agent", "data"))
    assert rows == [
        (2, "lead_agent", {"content": "WAL lets readers", "reasoning": "想一想"}),
        (3, "search_agent", {"content": "a subagent's notes"}),
    ]


def test_a_long_rows_pieces_carry_only_the_text_new_since_the_last(user, monkeypatch, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS, settings.RUN_LIVE_SECONDS = 600, 0
    sent = []
    monkeypatch.setattr(realtime, "group_send_on_commit", lambda *, group, type, **fields: sent.append((type, fields)))
    run = RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=user)), status=Run.Status.RUNNING)
    log = RunEventLog(run=run)
    long = "长" * LIVE_WHOLE_ROW_CHARS

    log.chunk(agent="lead_agent", content=long)
    log.chunk(agent="lead_agent", content="尾")
    log.chunk(agent="lead_agent", content="巴")

    deltas = [fields for type, fields in sent if type == realtime.RUN_DELTA]
    assert [(d["at"], d["content"]) for d in deltas] == [
        ([0, 0], long),
        ([LIVE_WHOLE_ROW_CHARS, 0], "尾"),
        ([LIVE_WHOLE_ROW_CHARS + 1, 0], "巴"),
    ]


def test_a_process_running_many_turns_sends_their_text_less_often(user, settings):
    settings.RUN_LIVE_SECONDS = 0.1
    run = RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=user)), status=Run.Status.RUNNING)
    log = RunEventLog(run=run)
    with contextlib.ExitStack() as held:
        for number in range(1, LIVE_TURNS_AT_FULL_RATE + 1):
            held.enter_context(Heartbeat(Lease(run_id=run.pk + number, attempt=1)))
        at_full_rate = log._live_interval()
        for number in range(LIVE_TURNS_AT_FULL_RATE + 1, 2 * LIVE_TURNS_AT_FULL_RATE + 1):
            held.enter_context(Heartbeat(Lease(run_id=run.pk + number, attempt=1)))
        busy = log._live_interval()

    assert at_full_rate == pytest.approx(0.1)
    assert busy == pytest.approx(0.2)
