import json
import threading
import time

import pytest
from django.db import DataError, connection, connections

from agents.models import Run, RunEvent
from agents.selectors import run_views
from agents.services import asking
from agents.services.runs import RunStateError, run_cancel, run_execute, run_retry
from artifacts.branches import branch_at, branch_heads, branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from conversations.models import Conversation
from tests.agents.test_engine import SUMMARY, call
from tests.artifacts.test_manager import LARGE
from tests.model_server import Drop, Status, Text, Truncated

pytestmark = pytest.mark.django_db


ANSWER = "## WAL\n\nWrite-ahead logging lets **readers** run beside one writer. " * 4


def _turn(user, content="What is WAL?"):
    conversation = asking.conversation_start(user=user, content=content, enqueue=False)
    return conversation.active_branch, conversation.active_branch.runs.get()


def _types(run):
    return list(run.events.values_list("type", flat=True))


def test_a_turn_streams_through_the_event_log_and_stores_the_response(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.05
    scripted_model.add(Text(ANSWER, chunk_size=4, delay=0.005))
    message, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    message.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert message.response == ANSWER.strip()
    types = _types(run)
    assert types[:2] == ["metadata", "agent_start"]
    assert types[-3:] == ["llm_complete", "agent_complete", "complete"]
    chunks = run.events.filter(type=RunEvent.Type.LLM_CHUNK)
    # Coalesced: far fewer rows than the model sent chunks, and nothing lost.
    assert 1 < chunks.count() < len(ANSWER) // 4 / 3
    assert "".join(e.data["content"] for e in chunks).strip() == ANSWER.strip()
    assert list(run.events.values_list("seq", flat=True)) == list(range(1, len(types) + 1))


def test_the_model_sees_the_branch_history_and_the_question(user, scripted_model):
    scripted_model.add(Text("First answer."), Text("Second answer."))
    message, run = _turn(user, "First question")
    run_execute(run_id=run.pk)
    follow_up = asking.message_post(conversation=message.conversation, content="Second question", enqueue=False)

    run_execute(run_id=follow_up.runs.get().pk)

    sent = scripted_model.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in sent[1:]] == ["First question", "First answer.", "Second question"]
    assert sent[0]["content"].startswith("# Role")


def test_usage_and_timing_are_recorded_in_the_metrics(user, scripted_model):
    scripted_model.add(Text("Short answer.", reasoning="thinking it over"))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    [execution] = run.metrics["agent_executions"]
    assert execution["agent_name"] == "lead_agent"
    assert execution["model"] == scripted_model.model
    assert execution["token_usage"]["completion_tokens"] > 0
    complete = run.events.get(type=RunEvent.Type.LLM_COMPLETE)
    assert complete.data["reasoning"] == "thinking it over"
    assert complete.data["content"] == "Short answer."


def test_a_stream_without_usage_still_completes(user, scripted_model):
    scripted_model.add(Text("No usage here.", usage=False))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.metrics["agent_executions"][0]["token_usage"] is None


def test_a_server_error_after_retries_fails_the_run_visibly(user, scripted_model):
    scripted_model.add(Status(500), Status(500), Status(500))
    message, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert len(scripted_model.requests) == 3  # the first try and two retries
    assert run.status == Run.Status.FAILED
    assert "500" in run.error
    error = run.events.last()
    assert error.type == RunEvent.Type.ERROR
    assert error.data["message"] == run.error
    message.refresh_from_db()
    assert message.response == ""


def test_a_retried_error_that_recovers_completes(user, scripted_model):
    scripted_model.add(Status(429), Text("Recovered."))
    message, run = _turn(user)

    run_execute(run_id=run.pk)

    message.refresh_from_db()
    assert message.response == "Recovered."


def test_a_stream_that_keeps_dropping_fails_the_run_with_the_reason(user, scripted_model):
    scripted_model.add(*(Drop("The beginning of an answer that never") for _ in range(3)))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "connection" in run.error.lower()
    assert run.events.filter(type=RunEvent.Type.LLM_RETRY).count() == 2
    assert run.events.last().type == RunEvent.Type.ERROR


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        # A connection dropped midway.
        (Drop, None),
        # A stream that ends before its finish reason is not taken as the answer.
        (Truncated, "the stream ended before the answer was finished"),
    ],
)
def test_a_broken_stream_is_asked_again_and_the_page_forgets_the_broken_part(user, scripted_model, broken, reason):
    scripted_model.add(broken("The beginning of an answer that never"), Text("A whole answer."))
    message, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    message.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and message.response == "A whole answer."
    assert len(scripted_model.requests) == 2
    [retry] = run.events.filter(type=RunEvent.Type.LLM_RETRY)
    if reason:
        assert retry.data["reason"] == reason
    assert run_views(runs=[run])[run.pk].text == "A whole answer."


def test_a_stream_that_keeps_ending_early_fails_the_run_saying_the_answer_was_cut_off(user, scripted_model):
    scripted_model.add(*(Truncated("The beginning of an answer that never") for _ in range(3)))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "the stream ended before the answer was finished" in run.error
    assert run.events.filter(type=RunEvent.Type.LLM_RETRY).count() == 2
    error = run.events.last()
    assert error.type == RunEvent.Type.ERROR and error.data["message"] == run.error
    # Never stored as a finished answer.
    assert not run.events.filter(type=RunEvent.Type.COMPLETE).exists()


def test_an_empty_answer_is_an_error(user, scripted_model):
    scripted_model.add(Text(""))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "The model returned an empty answer."


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
        _wait_for(lambda: run.events.filter(type=RunEvent.Type.LLM_CHUNK).exists())
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
        _wait_for(started)
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


def _wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


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
    later = asking.message_post(conversation=message.conversation, content="And for a flat?", enqueue=False)
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
    later = asking.message_post(conversation=message.conversation, content="Rewrite it for a flat", enqueue=False)
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


# --- a large artifact edited in small steps -----------------------------------------


def _report_saved(conversation):
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.create(artifact_id="report", content=LARGE)
    manager.flush_all()


def _tick(n):
    return Text(call("update_artifact", id="report", old_str=f"- [ ] item {n}:", new_str=f"- [x] item {n}:"))


def _ticked(*numbers):
    text = LARGE
    for n in numbers:
        text = text.replace(f"- [ ] item {n}:", f"- [x] item {n}:")
    return text


def _json_size(value) -> int:
    # psycopg passes a JSONField as a Jsonb wrapper, SQLite as text.
    value = getattr(value, "obj", value)
    return len((value if isinstance(value, str) else json.dumps(value, default=str)).encode())


class _Written:
    """Counts the bytes sent to the database in event rows and checkpoints."""

    def __init__(self):
        self.events = self.checkpoints = 0

    def __call__(self, execute, sql, params, many, context):
        size = sum(_json_size(param) for param in params or ())
        if sql.startswith('INSERT INTO "agents_runevent"'):
            self.events += size
        elif sql.startswith('UPDATE "agents_run"') and '"checkpoint"' in sql:
            self.checkpoints += size
        return execute(sql, params, many, context)


def test_ten_small_edits_of_a_200_kb_artifact_write_a_few_kb_of_events_and_checkpoints(user, scripted_model):
    message, run = _turn(user, "Tick the first ten items")
    _report_saved(message.conversation)
    scripted_model.add(*(_tick(n) for n in range(10)), Text("Ticked ten."))
    written = _Written()

    with connection.execute_wrapper(written):
        run_execute(run_id=run.pk)

    run.refresh_from_db()
    report = Artifact.objects.get(artifact_id="report")
    assert run.status == Run.Status.COMPLETED
    assert (report.content, report.current_version) == (_ticked(*range(10)), 11)
    # A dozen checkpoints (mostly the model's context) and three dozen events,
    # together less than half of one copy of the text: a copy in every
    # checkpoint and every tool_complete came to 4.6 MB.
    assert len(LARGE) > 200_000 and written.checkpoints + written.events < 100_000
    assert written.checkpoints > 10_000 and written.events > 5_000  # measured, not missed
    changes = [e.data["artifact_change"] for e in run.events.filter(type=RunEvent.Type.TOOL_COMPLETE).order_by("seq")]
    assert changes[-1] == {
        "artifact_id": "report",
        "title": "report",
        "version": 11,
        "length": len(LARGE),
        "removed": 13,
        "added": 13,
    }


def _refuse_inserting(artifact_id):
    """A database that refuses one artifact's rows for good, as a constraint would."""

    def wrapper(execute, sql, params, many, context):
        if sql.startswith("INSERT") and "artifacts_artifact" in sql and artifact_id in map(str, params or ()):
            raise DataError(f"value refused for {artifact_id}")
        return execute(sql, params, many, context)

    return wrapper


def test_artifacts_that_could_not_be_saved_end_the_turn_with_an_error_naming_them(user, scripted_model):
    scripted_model.add(
        Text(call("create_artifact", id="task_plan", content="- [x] write")),
        Text(call("create_artifact", id="report", content="# Report")),
        Text("Here is the answer."),
    )
    message, run = _turn(user)

    with connection.execute_wrapper(_refuse_inserting("report")):
        run_execute(run_id=run.pk)

    run.refresh_from_db()
    message.refresh_from_db()
    end = run.events.order_by("seq").last()
    assert (run.status, end.type) == (Run.Status.FAILED, RunEvent.Type.ERROR)
    assert "These artifacts could not be saved: report." in end.data["message"] == run.error
    assert end.data["artifacts"]["flushed"] == ["task_plan"] and list(end.data["artifacts"]["failed"]) == ["report"]
    # Nothing is lost: the answer stays and the checkpoint still carries the report.
    assert message.response == "Here is the answer."
    assert [entry["artifact_id"] for entry in run.checkpoint["artifacts"]] == ["report"]
    assert not run.events.filter(type=RunEvent.Type.COMPLETE).exists()
