"""A worker's side of a run (agents.services.execution): the turn streamed
through the event log, its failures made visible, a task delivered twice run
once, many turns at once in one process, and what its artifacts cost to write."""

import json
import math
import re
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import DataError, connection
from django.utils import timezone, translation

from agents.models import Run, RunEvent
from agents.selectors import run_views
from agents.services import execution, retention
from agents.services.execution import run_execute
from agents.services.runs import run_cancel
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from conversations import lifecycle
from tests import waits
from tests.agents.test_engine import call
from tests.artifacts.test_manager import LARGE
from tests.model_server import Drop, Status, StreamError, Text, Truncated

pytestmark = pytest.mark.django_db


ANSWER = "## WAL\n\nWrite-ahead logging lets **readers** run beside one writer. " * 4


def _turn(user, content="What is WAL?"):
    conversation = lifecycle.conversation_start(user=user, content=content, enqueue=False)
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
    follow_up = lifecycle.message_post(conversation=message.conversation, content="Second question", enqueue=False)

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


def test_a_turn_failed_mid_answer_keeps_the_text_streamed_before_the_failure(user, scripted_model):
    # Less than a chunk row's second of text: pages showed it live, before any row held it.
    scripted_model.add(StreamError("WAL appends every change first", message="upstream provider overloaded"))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == (
        "The model service reported an error in the middle of its answer: upstream provider overloaded"
    )
    assert run.message.response == "WAL appends every change first"
    assert len(scripted_model.requests) == 1


def test_a_thinking_model_that_wrote_no_answer_fails_saying_so(user, scripted_model):
    scripted_model.add(Text("<think>Step 1: recall fsync. Step 2: compare with data pages."))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("The model thought but wrote no answer; its thinking is in the Activity.")
    complete = run.events.get(type=RunEvent.Type.LLM_COMPLETE)
    assert complete.data["reasoning"] == "Step 1: recall fsync. Step 2: compare with data pages."
    # Stored in English, read in the reader's language.
    with translation.override("zh-hans"):
        assert run_views(runs=[run])[run.pk].error.startswith("模型只进行了思考，没有写出回答")


def test_an_empty_answer_is_an_error(user, scripted_model):
    scripted_model.add(Text(""))
    _, run = _turn(user)

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "The model returned an empty answer."


@pytest.mark.django_db(transaction=True)
def test_a_task_delivered_twice_runs_the_turn_once(user, scripted_model):
    scripted_model.add(Text("Once."))
    _, run = _turn(user)

    execution.run_start(run_id=run.pk)
    execution.run_start(run_id=run.pk)

    run.refresh_from_db()
    assert len(scripted_model.requests) == 1
    assert run.attempts == 1
    assert _types(run).count("complete") == 1


def test_runs_are_claimed_together_and_only_those_still_queued(user, django_assert_max_num_queries):
    runs = [_turn(user, f"Question {i}")[1] for i in range(4)]
    # Another worker took the second meanwhile; the fourth was answered already.
    Run.objects.filter(pk=runs[1].pk).update(status=Run.Status.RUNNING, attempts=1, worker="other:1")
    Run.objects.filter(pk=runs[3].pk).update(status=Run.Status.COMPLETED)

    with django_assert_max_num_queries(2):
        claimed = execution.runs_claim(run_ids=[run.pk for run in runs])

    assert [run.pk for run in claimed] == [runs[0].pk, runs[2].pk]
    assert {(run.status, run.attempts, run.worker) for run in claimed} == {
        (Run.Status.RUNNING, 1, execution.worker_name())
    }
    # The message comes with it: the turn reads its question without another query.
    with django_assert_max_num_queries(0):
        assert claimed[1].message.conversation.owner_id == user.pk
    assert Run.objects.get(pk=runs[1].pk).worker == "other:1"
    assert execution.runs_claim(run_ids=[runs[0].pk]) == []


# --- many turns in one worker process ------------------------------------------

# About two seconds of streaming: long enough to see turns side by side.
STREAMED = "Readers run beside one writer. " * 8


def _running_count():
    return Run.objects.filter(status=Run.Status.RUNNING).count()


def _worker_process(run):
    """django-q2 delivering the run's task to a worker process: the task
    takes the other queued runs too, and returns once none is left."""
    thread = threading.Thread(target=_start_and_close, args=(run.pk,))
    thread.start()
    return thread


def _start_and_close(run_id):
    try:
        execution.run_start(run_id=run_id)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_worker_process_runs_many_turns_at_once_and_no_more_than_its_limit(user, scripted_model, settings):
    settings.RUN_TURNS_PER_WORKER = 3
    # One person's five: the limit seen is the process's, not the person's.
    settings.TURNS_PER_USER = 0
    scripted_model.add(*[Text(STREAMED, chunk_size=8, delay=0.06) for _ in range(5)])
    runs = [_turn(user, f"Question {i}")[1] for i in range(5)]

    worker = _worker_process(runs[0])
    most = 0
    while worker.is_alive():
        most = max(most, _running_count())
        time.sleep(0.02)

    assert most == 3
    assert len(scripted_model.requests) == 5
    for run in runs:
        run.refresh_from_db()
        assert (run.status, run.attempts, run.message.response) == (Run.Status.COMPLETED, 1, STREAMED.strip())
    # The other runs' tasks, delivered now, find them done and run nothing.
    assert [execution.run_start(run_id=run.pk) for run in runs[1:]] == [0] * 4
    assert len(scripted_model.requests) == 5


@pytest.mark.django_db(transaction=True)
def test_stopping_one_of_many_turns_in_a_process_leaves_the_others_streaming(user, scripted_model, settings):
    settings.TURNS_PER_USER = 0
    scripted_model.add(*[Text(STREAMED, chunk_size=4, delay=0.05) for _ in range(4)])
    runs = [_turn(user, f"Question {i}")[1] for i in range(4)]
    worker = _worker_process(runs[0])
    waits.until(lambda: RunEvent.objects.filter(type=RunEvent.Type.LLM_CHUNK, run__in=runs).count() >= 4, timeout=20)

    run_cancel(run_id=runs[0].pk, user=user)
    waits.until(lambda: Run.objects.get(pk=runs[0].pk).status == Run.Status.CANCELLED, timeout=20)
    others = Run.objects.filter(pk__in=[run.pk for run in runs[1:]])
    assert set(others.values_list("status", flat=True)) == {Run.Status.RUNNING}
    worker.join(timeout=30)

    assert not worker.is_alive()
    assert set(others.values_list("status", flat=True)) == {Run.Status.COMPLETED}
    assert all(run.message.response == STREAMED.strip() for run in others.select_related("message"))


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


# What one streamed turn may write, at the size of a real one (issue 49): an
# 800-token answer at 40 tokens a second, asked, run and folded, in 40 rows.
TURN_ROWS, ANSWER_TOKENS, TOKENS_PER_SECOND = 40, 800, 40
# django-q's ORM broker per task: the queued row, its lock, its delete and the result kept.
QUEUE_ROWS = 4
WRITE = re.compile(r'\s*(INSERT INTO|UPDATE|DELETE FROM)\s+"?(\w+)', re.IGNORECASE)


def test_a_streamed_turn_writes_no_more_rows_than_its_budget(user, scripted_model, settings):
    streaming = ANSWER_TOKENS / TOKENS_PER_SECOND
    # Rows that come with time, at the settings' cadence: a chunk row per flush interval
    # (and the last), and the lease's heartbeat.
    timed = math.ceil(streaming / settings.RUN_CHUNK_FLUSH_SECONDS) + 1
    timed += math.ceil(streaming / (settings.RUN_HEARTBEAT_STALE / 4))
    # Here the answer streams at once, in a single flush: its rows are counted above.
    settings.RUN_CHUNK_FLUSH_SECONDS = 3600
    scripted_model.add(Text(" ".join(f"热泵{n}" for n in range(ANSWER_TOKENS)), chunk_size=12))
    writes = Counter()

    def count(execute, sql, params, many, context):
        if written := WRITE.match(sql):
            writes[" ".join(written.groups())] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        _, run = _turn(user)
        run_execute(run_id=run.pk)
        retention.runs_fold(finished_before=timezone.now() + timedelta(seconds=1))

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.message.response.endswith(f"热泵{ANSWER_TOKENS - 1}")
    # The one chunk row written here, at the end of the stream, is among the timed ones.
    assert sum(writes.values()) - 1 + timed + QUEUE_ROWS <= TURN_ROWS, (timed, dict(writes))
