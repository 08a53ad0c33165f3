"""What people do to runs (agents.services.runs): cancel, which a running
turn's worker heeds at its next check, and retry."""

import threading

import pytest
from django.db import connections

from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.services.runs import RunStateError, run_cancel, run_retry
from artifacts.branches import branch_at, branch_heads
from conversations import lifecycle
from conversations.models import Conversation
from tests import waits
from tests.agents.services.test_execution import _turn
from tests.agents.test_engine import SUMMARY, call
from tests.model_server import Status, Text

pytestmark = pytest.mark.django_db


def test_cancelling_a_queued_run_ends_it_and_the_worker_skips_it(user, scripted_model):
    _, run = _turn(user)

    run_cancel(run_id=run.pk, user=user)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.events.get().data["cancelled"] is True
    assert run_execute(run_id=run.pk) is None
    assert scripted_model.requests == []
    with pytest.raises(RunStateError, match="already ended"):
        run_cancel(run_id=run.pk, user=user)


def test_only_the_owner_can_cancel(user, other_user):
    _, run = _turn(user)
    with pytest.raises(Run.DoesNotExist):
        run_cancel(run_id=run.pk, user=other_user)


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_streaming_run_stops_it_and_keeps_the_partial_answer(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.0
    scripted_model.add(Text("word " * 400, chunk_size=5, delay=0.02))  # about 8 s if left alone
    _, run = _turn(user)
    worker = threading.Thread(target=_execute_and_close, args=(run.pk,))
    worker.start()
    try:
        waits.until(lambda: run.events.filter(type=RunEvent.Type.LLM_CHUNK).exists(), timeout=10)
        run_cancel(run_id=run.pk, user=user)
    finally:
        worker.join(timeout=30)

    run.refresh_from_db()
    assert not worker.is_alive()
    assert run.status == Run.Status.CANCELLED
    assert run.message.response.startswith("word") and len(run.message.response) < len("word " * 400) - 5
    terminal = run.events.get(type__in=RunEvent.TERMINAL_TYPES)
    assert terminal.data["cancelled"] is True


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("moment", ["while the model thinks", "while the context is summarised"])
def test_stop_reaches_a_model_call_that_sends_nothing(user, scripted_model, settings, moment):
    # A model that thinks (or summarises) for half a minute before its first
    # token: Stop must not wait for it.
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.0
    if moment == "while the model thinks":
        scripted_model.add(Text("An answer at last.", wait=30))
        started = lambda: len(scripted_model.requests) == 1  # noqa: E731
    else:
        settings.ARTIFACTFLOW_LLM = {**settings.ARTIFACTFLOW_LLM, "context_window": 10_000}
        settings.COMPACTION_THRESHOLD = 0.7
        scripted_model.add(
            Text(call("create_artifact", id="notes", content="WAL notes. " * 3000), chunk_size=4000),
            Text(SUMMARY, wait=30),
        )
        started = lambda: run.events.filter(type=RunEvent.Type.COMPACTION_START).exists()  # noqa: E731
    _, run = _turn(user)
    worker = threading.Thread(target=_execute_and_close, args=(run.pk,))
    worker.start()
    try:
        waits.until(started, timeout=10)
        run_cancel(run_id=run.pk, user=user)
    finally:
        worker.join(timeout=10)

    assert not worker.is_alive()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.events.get(type__in=RunEvent.TERMINAL_TYPES).data["cancelled"] is True
    assert run.metrics["agent_executions"][-1]["success"] is False


def _execute_and_close(run_id):
    try:
        run_execute(run_id=run_id)
    finally:
        connections.close_all()


def test_a_failed_turn_can_be_tried_again_once_by_its_owner(user, other_user):
    message, run = _turn(user)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="boom")

    with pytest.raises(Run.DoesNotExist):
        run_retry(run_id=run.pk, user=other_user)
    retried = run_retry(run_id=run.pk, user=user)

    assert retried.message == message and retried.status == Run.Status.QUEUED
    with pytest.raises(RunStateError, match="already"):
        run_retry(run_id=run.pk, user=user)
    with pytest.raises(RunStateError, match="failed or cancelled"):
        run_retry(run_id=retried.pk, user=user)


def _cancelled_under_a_later_turn(user):
    """Turn 7 cancelled, then turn 8 asked on top of it: (turn 7's run, turn 8's message)."""
    message, run = _turn(user, "第七问：热泵在零下能用吗？")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    later = lifecycle.message_post(conversation=message.conversation, content="And for a flat?", enqueue=False)
    later.runs.update(status=Run.Status.COMPLETED)
    return run, later


def test_retrying_a_turn_with_later_turns_below_it_starts_a_branch_beside_it(user, other_user):
    run, later = _cancelled_under_a_later_turn(user)
    message = run.message

    with pytest.raises(Run.DoesNotExist):
        run_retry(run_id=run.pk, user=other_user)
    retried = run_retry(run_id=run.pk, user=user)

    branch = retried.message
    assert branch != message and (branch.parent_id, branch.content) == (message.parent_id, message.content)
    assert retried.status == Run.Status.QUEUED and retried.retry_of == run
    assert list(message.runs.all()) == [run] and list(later.runs.values_list("message", flat=True)) == [later.pk]
    assert Conversation.objects.get(pk=message.conversation_id).active_branch == branch
    with pytest.raises(RunStateError, match="already"):
        run_retry(run_id=run.pk, user=user)
    assert message.conversation.messages.count() == 3


def test_retrying_the_newest_turn_answers_its_own_message_again(user):
    message, run = _turn(user)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)

    retried = run_retry(run_id=run.pk, user=user)

    assert retried.message == message and retried.retry_of == run
    assert message.conversation.messages.count() == 1


def _heads(message):
    branch = branch_at(session=message.conversation.artifact_session, message_id=message.pk)
    return [(v.artifact.artifact_id, v.version, v.content) for v in branch_heads(branch=branch)]


def test_a_retried_old_turn_saves_on_its_new_branch_and_the_newest_turn_sees_what_it_saw(user, scripted_model):
    scripted_model.add(
        Text(call("create_artifact", id="report", content="# Report\n\n第七问的草稿", title="Report")),
        Status(500),
        Status(500),
        Status(500),
    )
    message, run = _turn(user, "Write the report")
    run_execute(run_id=run.pk)
    scripted_model.add(
        Text(call("rewrite_artifact", id="report", content="# Report\n\nTurn 8's report")), Text("Rewritten.")
    )
    later = lifecycle.message_post(conversation=message.conversation, content="Rewrite it for a flat", enqueue=False)
    run_execute(run_id=later.runs.get().pk)
    seen = _heads(later)
    assert Run.objects.get(pk=run.pk).status == Run.Status.FAILED and seen[0][2] == "# Report\n\nTurn 8's report"

    scripted_model.add(
        Text(call("create_artifact", id="summary", content="The retried summary", title="Summary")),
        Text(call("create_artifact", id="report", content="# Report\n\nThe retried report", title="Report")),
        Text("Done again."),
    )
    retried = run_retry(run_id=run.pk, user=user)
    run_execute(run_id=retried.pk)

    assert Run.objects.get(pk=retried.pk).status == Run.Status.COMPLETED
    assert _heads(later) == seen
    assert [(i, c) for i, _, c in _heads(retried.message)] == [
        ("report", "# Report\n\nThe retried report"),
        ("summary", "The retried summary"),
    ]
