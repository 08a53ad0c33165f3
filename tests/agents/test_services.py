import json
import threading
import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import DataError, connection, connections
from django.utils import timezone

from agents import asking, services
from agents.models import Run, RunEvent
from agents.selectors import run_views, session_active_runs
from agents.tasks import run_turn
from artifacts import selectors as artifact_selectors
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from tests.agents.test_engine import call
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

    services.run_execute(run_id=run.pk)

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
    services.run_execute(run_id=run.pk)
    follow_up = asking.message_post(conversation=message.conversation, content="Second question", enqueue=False)

    services.run_execute(run_id=follow_up.runs.get().pk)

    sent = scripted_model.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in sent[1:]] == ["First question", "First answer.", "Second question"]
    assert sent[0]["content"].startswith("# Role")


def test_usage_and_timing_are_recorded_in_the_metrics(user, scripted_model):
    scripted_model.add(Text("Short answer.", reasoning="thinking it over"))
    _, run = _turn(user)

    services.run_execute(run_id=run.pk)

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

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.metrics["agent_executions"][0]["token_usage"] is None


def test_a_task_delivered_twice_runs_the_turn_once(user, scripted_model):
    scripted_model.add(Text("Once."))
    _, run = _turn(user)

    run_turn(run.pk)
    run_turn(run.pk)

    run.refresh_from_db()
    assert len(scripted_model.requests) == 1
    assert run.attempts == 1
    assert _types(run).count("complete") == 1


def test_a_server_error_after_retries_fails_the_run_visibly(user, scripted_model):
    scripted_model.add(Status(500), Status(500), Status(500))
    message, run = _turn(user)

    services.run_execute(run_id=run.pk)

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

    services.run_execute(run_id=run.pk)

    message.refresh_from_db()
    assert message.response == "Recovered."


def test_a_stream_that_keeps_dropping_fails_the_run_with_the_reason(user, scripted_model):
    scripted_model.add(*(Drop("The beginning of an answer that never") for _ in range(3)))
    _, run = _turn(user)

    services.run_execute(run_id=run.pk)

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

    services.run_execute(run_id=run.pk)

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

    services.run_execute(run_id=run.pk)

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

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "The model returned an empty answer."


def _stale(run, settings, **fields):
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE + 1),
        **fields,
    )


class _WorkerKilled(BaseException):
    """Stands for the worker process dying: nothing in the run service catches it."""


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_worker_died_resumes_from_its_checkpoint_with_its_artifacts(user, scripted_model, settings):
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="kept across the crash")),
        Text("Lost with the worker."),
        Text("Final answer."),
    )
    _, run = _turn(user)
    completions = []

    def die_in_the_second_step(event):
        completions.extend([event.type] if event.type == RunEvent.Type.LLM_COMPLETE else [])
        if len(completions) == 2:
            raise _WorkerKilled

    with pytest.raises(_WorkerKilled):
        services.run_execute(run_id=run.pk, on_event=die_in_the_second_step)
    assert not Artifact.objects.exists()
    _stale(run, settings)

    assert services.runs_sweep() == {"recovered": 1, "expired": 0}
    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.attempts, run.message.response) == (Run.Status.COMPLETED, 2, "Final answer.")
    assert Artifact.objects.get(artifact_id="notes").content == "kept across the crash"
    assert run.events.filter(type=RunEvent.Type.METADATA, data__resumed=True).count() == 1
    assert len(scripted_model.requests) == 3


def test_a_run_whose_worker_died_twice_fails_visibly(user, scripted_model, settings):
    _, run = _turn(user)
    _stale(run, settings, attempts=2, worker_deaths=1)

    services.runs_sweep()

    run.refresh_from_db()
    assert (run.status, run.worker_deaths) == (Run.Status.FAILED, 2)
    assert "worker" in run.error
    assert _types(run) == ["error"]
    assert scripted_model.requests == []


def _shown(conversation):
    """The branch the conversation's page shows, over its turns in progress."""
    return branch_shown(conversation=conversation, active_runs=session_active_runs(session_id=conversation.pk))


def _killed_at_first_chunk_of_attempt(attempt):
    """An on_event that kills the worker once its answer has started to show."""

    def on_event(event):
        if event.type == RunEvent.Type.LLM_CHUNK and Run.objects.get(pk=event.run_id).attempts == attempt:
            raise _WorkerKilled

    return on_event


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_worker_dies_twice_saves_its_artifacts_and_keeps_the_answer_shown(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0  # every streamed piece is a row the page shows
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="found before the crashes")),
        Text("Lost with the first worker."),
        Text("Half an answer, then the second worker died."),
    )
    _, run = _turn(user)
    with pytest.raises(_WorkerKilled):
        services.run_execute(run_id=run.pk, on_event=_killed_at_first_chunk_of_attempt(1))
    _stale(run, settings)
    services.runs_sweep()
    with pytest.raises(_WorkerKilled):
        services.run_execute(run_id=run.pk, on_event=_killed_at_first_chunk_of_attempt(2))
    shown = "".join(
        e.data["content"]
        for e in run.events.filter(type=RunEvent.Type.LLM_CHUNK, seq__gt=run.events.get(data__resumed=True).seq)
    )
    _stale(run, settings)

    assert services.runs_sweep()["recovered"] == 1

    run.refresh_from_db()
    assert (run.status, run.error, run.worker_deaths) == (Run.Status.FAILED, services.WORKER_DIED, 2)
    assert Artifact.objects.get(artifact_id="notes").content == "found before the crashes"
    assert shown and run.message.response == shown.strip()
    error = run.events.get(type=RunEvent.Type.ERROR)
    assert error.data["artifacts"] == {"flushed": ["notes"], "conflicts": [], "failed": {}}
    assert run.checkpoint["artifacts"] == []


@pytest.mark.django_db(transaction=True)
def test_a_permission_answer_does_not_use_up_the_resume_after_a_worker_death(user, scripted_model, settings):
    settings.TOOL_PERMISSIONS = {"create_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="approved")),
        Text("Lost with the worker."),
        Text("Done after the resume."),
    )
    _, run = _turn(user)
    services.run_execute(run_id=run.pk)
    pending = Run.objects.get(pk=run.pk).checkpoint["turn"]["pending"]
    services.permission_answer(run_id=run.pk, user=user, request_id=pending["id"], decision="approve", enqueue=False)
    with pytest.raises(_WorkerKilled):
        services.run_execute(run_id=run.pk, on_event=_killed_in_step(1))
    _stale(run, settings)

    services.runs_sweep()
    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.attempts, run.worker_deaths) == (Run.Status.COMPLETED, 3, 1)
    assert run.message.response == "Done after the resume."
    assert Artifact.objects.get(artifact_id="notes").content == "approved"


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_run_queued_after_its_worker_died_saves_what_its_checkpoint_carries(
    user, scripted_model, settings
):
    scripted_model.add(Text(call("create_artifact", id="notes", content="in the checkpoint only")), Text("Lost."))
    _, run = _turn(user)
    with pytest.raises(_WorkerKilled):
        services.run_execute(run_id=run.pk, on_event=_killed_in_step(2))
    _stale(run, settings)
    services.runs_sweep()
    assert not Artifact.objects.exists()

    services.run_cancel(run_id=run.pk, user=user)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert Artifact.objects.get(artifact_id="notes").content == "in the checkpoint only"
    assert run.events.get(type=RunEvent.Type.ERROR).data["artifacts"]["flushed"] == ["notes"]


def test_a_worker_that_dies_while_saving_the_answer_hands_it_on_without_asking_the_model_again(
    user, scripted_model, settings
):
    scripted_model.add(Text("The answer, paid for once."))
    _, run = _turn(user)
    services.run_execute(run_id=run.pk)
    # What a worker leaves when it dies after the last step's checkpoint and
    # before the end is saved: the run still running, the answer unsaved.
    run.events.filter(type=RunEvent.Type.COMPLETE).delete()
    run.message.__class__.objects.filter(pk=run.message_id).update(response="", response_html="")
    _stale(run, settings, finished_at=None)

    services.runs_sweep()
    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.message.response) == (Run.Status.COMPLETED, "The answer, paid for once.")
    assert run.events.get(type=RunEvent.Type.COMPLETE).data["response"] == "The answer, paid for once."
    assert len(scripted_model.requests) == 1


def test_a_redelivered_task_of_a_dead_workers_run_queues_it_again(user, scripted_model, settings):
    _, run = _turn(user)
    _stale(run, settings, attempts=1)

    run_turn(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert scripted_model.requests == []


def test_a_redelivered_task_leaves_a_live_run_alone(user, scripted_model):
    _, run = _turn(user)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())

    run_turn(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert _types(run) == []


def test_cancelling_a_queued_run_ends_it_and_the_worker_skips_it(user, scripted_model):
    _, run = _turn(user)

    services.run_cancel(run_id=run.pk, user=user)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.events.get().data["cancelled"] is True
    assert services.run_execute(run_id=run.pk) is None
    assert scripted_model.requests == []
    with pytest.raises(services.RunStateError, match="already ended"):
        services.run_cancel(run_id=run.pk, user=user)


def test_only_the_owner_can_cancel(user, other_user):
    _, run = _turn(user)
    with pytest.raises(Run.DoesNotExist):
        services.run_cancel(run_id=run.pk, user=other_user)


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_streaming_run_stops_it_and_keeps_the_partial_answer(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.0
    scripted_model.add(Text("word " * 400, chunk_size=5, delay=0.02))  # about 8 s if left alone
    _, run = _turn(user)
    worker = threading.Thread(target=_execute_and_close, args=(run.pk,))
    worker.start()
    try:
        _wait_for(lambda: run.events.filter(type=RunEvent.Type.LLM_CHUNK).exists())
        services.run_cancel(run_id=run.pk, user=user)
    finally:
        worker.join(timeout=30)

    run.refresh_from_db()
    assert not worker.is_alive()
    assert run.status == Run.Status.CANCELLED
    assert run.message.response.startswith("word") and len(run.message.response) < len("word " * 400) - 5
    terminal = run.events.get(type__in=RunEvent.TERMINAL_TYPES)
    assert terminal.data["cancelled"] is True


def _execute_and_close(run_id):
    try:
        services.run_execute(run_id=run_id)
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
        services.run_retry(run_id=run.pk, user=other_user)
    retried = services.run_retry(run_id=run.pk, user=user)

    assert retried.message == message and retried.status == Run.Status.QUEUED
    with pytest.raises(services.RunStateError, match="already"):
        services.run_retry(run_id=run.pk, user=user)
    with pytest.raises(services.RunStateError, match="failed or cancelled"):
        services.run_retry(run_id=retried.pk, user=user)


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


def _killed_in_step(step):
    """An on_event that kills the worker when the step's model call is logged:
    the steps before it are checkpointed, its tool has not run."""
    completions = []

    def on_event(event):
        completions.extend([event] if event.type == RunEvent.Type.LLM_COMPLETE else [])
        if len(completions) == step:
            raise _WorkerKilled

    return on_event


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
        services.run_execute(run_id=run.pk)

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


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_after_five_edits_resumes_with_them_though_the_cache_is_gone(user, scripted_model, settings):
    message, run = _turn(user, "Tick the first ten items")
    _report_saved(message.conversation)
    # The sixth step's model call is lost with the worker and asked again.
    scripted_model.add(*(_tick(n) for n in range(6)), *(_tick(n) for n in range(5, 10)), Text("Ticked ten."))
    with pytest.raises(_WorkerKilled):
        services.run_execute(run_id=run.pk, on_event=_killed_in_step(6))
    run.refresh_from_db()
    assert Artifact.objects.get(artifact_id="report").content == LARGE
    assert len(json.dumps(run.checkpoint)) < 10_000
    cache.clear()  # a restart may lose the cache: the checkpoint must not need it
    _stale(run, settings)
    services.runs_sweep()
    shown_on_resume = []

    def look_at_the_pane(event):
        if not shown_on_resume:
            view = artifact_selectors.artifact_get(branch=_shown(message.conversation), artifact_id="report")
            shown_on_resume.append((view.live, view.content, view.version))

    services.run_execute(run_id=run.pk, on_event=look_at_the_pane)

    assert shown_on_resume == [(True, _ticked(*range(5)), 6)]
    run.refresh_from_db()
    report = Artifact.objects.get(artifact_id="report")
    assert (run.status, run.attempts, run.message.response) == (Run.Status.COMPLETED, 2, "Ticked ten.")
    assert list(report.versions.values_list("version", flat=True)) == [1, 11]
    assert report.content == _ticked(*range(10))
    assert report.versions.get(version=11).changes == [[f"- [ ] item {n}:", f"- [x] item {n}:"] for n in range(10)]


@pytest.mark.django_db(transaction=True)
def test_a_checkpoint_written_before_the_upgrade_still_resumes(user, scripted_model, settings):
    message, run = _turn(user, "Tick the first three items")
    _report_saved(message.conversation)
    scripted_model.add(_tick(0), _tick(1), _tick(2), _tick(2), Text("Ticked three."))
    with pytest.raises(_WorkerKilled):
        services.run_execute(run_id=run.pk, on_event=_killed_in_step(3))
    run.refresh_from_db()
    # What checkpoints held before they held splices: each working copy whole.
    whole_copies = [
        {
            "artifact_id": "report",
            "content_type": "text/markdown",
            "title": "report",
            "content": _ticked(0, 1),
            "source": "agent",
            "version": 3,
            "base_lock_version": 1,
            "update_type": "update",
            "changes": [["- [ ] item 0:", "- [x] item 0:"], ["- [ ] item 1:", "- [x] item 1:"]],
            "dirty": True,
        }
    ]
    Run.objects.filter(pk=run.pk).update(checkpoint={**run.checkpoint, "artifacts": whole_copies})
    cache.clear()
    _stale(run, settings)
    services.runs_sweep()

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    report = Artifact.objects.get(artifact_id="report")
    assert (run.status, run.message.response) == (Run.Status.COMPLETED, "Ticked three.")
    assert (report.content, report.current_version) == (_ticked(0, 1, 2), 4)
    assert len(report.versions.get(version=4).changes) == 3


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
        services.run_execute(run_id=run.pk)

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


def test_a_turn_paused_for_permission_saves_one_version_per_artifact(user, scripted_model, settings):
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="task_plan", content="- [ ] read")),
        Text(call("update_artifact", id="task_plan", old_str="- [ ] read", new_str="- [x] read")),
        Text(call("rewrite_artifact", id="task_plan", content="- [x] read\n- [x] ask")),
        Text("Done."),
    )
    message, run = _turn(user)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING_PERMISSION
    # Nothing saved during the pause; the pane still shows the work.
    assert not Artifact.objects.exists()
    shown = artifact_selectors.artifact_get(branch=_shown(message.conversation), artifact_id="task_plan")
    assert (shown.live, shown.content) == (True, "- [x] read")

    pending = run.checkpoint["turn"]["pending"]
    services.permission_answer(run_id=run.pk, user=user, request_id=pending["id"], decision="approve", enqueue=False)
    services.run_execute(run_id=run.pk)

    plan = Artifact.objects.get(artifact_id="task_plan")
    assert list(plan.versions.values_list("version", "content")) == [(3, "- [x] read\n- [x] ask")]


@pytest.mark.django_db(transaction=True)
def test_the_question_of_a_paused_turn_is_logged_with_the_pause(user, scripted_model, settings):
    # A page takes a run's status from its row and shows the question only
    # while the row says it waits: the two must never be seen apart.
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="draft")),
        Text(call("rewrite_artifact", id="notes", content="final")),
    )
    _, run = _turn(user)
    seen = []

    def on_event(event):
        if event.type == RunEvent.Type.PERMISSION_REQUEST:
            seen.append(Run.objects.get(pk=run.pk).status)

    services.run_execute(run_id=run.pk, on_event=on_event)
    assert seen == [Run.Status.WAITING_PERMISSION]
    [request] = run.events.filter(type=RunEvent.Type.PERMISSION_REQUEST)
    assert (request.agent, request.data["tool"], request.data["params"]) == (
        "lead_agent",
        "rewrite_artifact",
        {"id": "notes", "content": "final"},
    )
    assert request.data["id"] == Run.objects.get(pk=run.pk).checkpoint["turn"]["pending"]["id"]


def test_cancelling_a_paused_turn_saves_its_work_once(user, scripted_model, settings):
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="kept")),
        Text(call("rewrite_artifact", id="notes", content="never approved")),
    )
    _, run = _turn(user)
    services.run_execute(run_id=run.pk)

    services.run_cancel(run_id=run.pk, user=user)

    notes = Artifact.objects.get(artifact_id="notes")
    assert list(notes.versions.values_list("version", "content", "run_id")) == [(1, "kept", run.pk)]
