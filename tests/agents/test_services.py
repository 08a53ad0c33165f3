from datetime import timedelta

import pytest
from django.utils import timezone

from agents import services
from agents.models import Run, RunEvent
from agents.tasks import run_turn
from conversations import services as conversation_services
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


def test_a_connection_dropped_mid_stream_fails_the_run_and_keeps_the_partial_text(user, scripted_model):
    scripted_model.add(Drop("The beginning of an answer that never"))
    _, run = _turn(user)

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "connection" in run.error.lower()
    streamed = "".join(e.data["content"] for e in run.events.filter(type=RunEvent.Type.LLM_CHUNK))
    assert streamed == "The beginning of an answer that never"
    assert run.events.last().type == RunEvent.Type.ERROR


def test_an_empty_answer_is_an_error(user, scripted_model):
    scripted_model.add(Text(""))
    _, run = _turn(user)

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == "The model returned an empty answer."


def test_a_redelivered_task_fails_a_run_whose_worker_died(user, scripted_model, settings):
    _, run = _turn(user)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_STALE + 1)
    )

    run_turn(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "worker" in run.error
    assert _types(run) == ["error"]
    assert scripted_model.requests == []


def test_a_redelivered_task_leaves_a_live_run_alone(user, scripted_model):
    _, run = _turn(user)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())

    run_turn(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert _types(run) == []


def test_without_an_api_key_the_demo_model_answers(user, settings):
    settings.ARTIFACTFLOW_LLM = {**settings.ARTIFACTFLOW_LLM, "api_key": ""}
    message, run = _turn(user, "Is anyone there?")

    services.run_execute(run_id=run.pk)

    run.refresh_from_db()
    message.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.model == "demo"
    assert run.events.get(type=RunEvent.Type.METADATA).data["demo"] is True
    assert "Is anyone there?" in message.response
