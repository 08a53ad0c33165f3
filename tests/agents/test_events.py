import re
from pathlib import Path

import pytest

from agents.events import RunEventLog
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

    RunEventLog(run=run).emit(RunEvent.Type.AGENT_START, agent="lead_agent", data={"instruction": "Take notes"})

    [(group, type, fields)] = sent
    assert (group, type, fields) == (
        realtime.conversation_group(conversation.pk),
        realtime.RUN_EVENT,
        {"run_id": run.pk, "seq": 1},
    )
    documented = re.search(r'`\{"type": "run\.event", ([^}]*)\}`', DOC.read_text(encoding="utf-8"))[1]
    assert [name.strip('"') for name in documented.split(", ")] == list(fields)
