import threading
import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from agents import services
from agents.selectors import run_views
from agents.models import Run, RunEvent
from agents.tasks import run_turn
from artifacts.models import Artifact
from conversations import services as conversation_services
from tests.agents.test_engine import call
from tests.model_server import Drop, Status, Text

pytestmark = pytest.mark.django_db

ANSWER = "## WAL\n\nWrite-ahead logging lets **readers** run beside one writer. " * 4


def _turn(user, content="What is WAL?"):
    conversation = conversation_services.conversation_start(user=user, content=content, enqueue=False)
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
    follow_up = conversation_services.message_post(
        conversation=message.conversation, content="Second question", enqueue=False
    )

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


def test_a_stream_dropped_midway_is_asked_again_and_the_page_forgets_the_broken_part(user, scripted_model):
    scripted_model.add(Drop("The beginning of an answer that never"), Text("A whole answer."))
    message, run = _turn(user)

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    message.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and message.response == "A whole answer."
    assert run.events.filter(type=RunEvent.Type.LLM_RETRY).count() == 1
    view = run_views(runs=[run])[run.pk]
    assert view.text == "A whole answer."


def test_a_stream_that_keeps_dropping_fails_the_run_with_the_reason(user, scripted_model):
    scripted_model.add(*(Drop("The beginning of an answer that never") for _ in range(3)))
    _, run = _turn(user)

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "connection" in run.error.lower()
    assert run.events.filter(type=RunEvent.Type.LLM_RETRY).count() == 2
    assert run.events.last().type == RunEvent.Type.ERROR


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
    _stale(run, settings, attempts=2)

    services.runs_sweep()

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "worker" in run.error
    assert _types(run) == ["error"]
    assert scripted_model.requests == []


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
