"""Retention (agents.services.retention): a finished turn folded renders as
before on its page, its activity and its trace; nothing unfinished is touched;
a second fold changes nothing; idle conversations' events expire when asked."""

import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Run, RunEvent
from agents.services import retention
from agents.services.execution import run_execute
from agents.services.recovery import runs_sweep
from agents.state import TURN
from agents.trace import run_trace
from tests.agents.services.test_execution import _turn
from tests.agents.services.test_recovery import _stale, _WorkerKilled
from tests.agents.test_engine import call
from tests.factories import RunFactory
from tests.model_server import Drop, Text

pytestmark = pytest.mark.django_db

ANSWER = "## WAL\n\nWrite-ahead logging lets **readers** run beside one writer. " * 6
CSRF = re.compile(r'csrf[^"]*"\s*:?\s*(value=)?"[^"]*"|csrfmiddlewaretoken" value="[^"]*"')


def _shown(user, run) -> dict:
    """What a person and an administrator see of the run: the conversation's
    page, its activity and its trace."""
    run = Run.objects.select_related("message__conversation").get(pk=run.pk)
    client = Client()
    client.force_login(user)
    page = client.get(run.message.conversation.get_absolute_url())
    activity = client.get(reverse("run-activity", args=[run.pk]))
    assert page.status_code == activity.status_code == 200
    trace = run_trace(run=run)
    return {
        "page": CSRF.sub("", page.text),
        "activity": activity.text,
        "trace": [(row.at, row.seq, row.type, row.agent, row.summary, row.detail, row.failed) for row in trace.rows],
        "figures": (trace.agent_figures, trace.tool_figures, trace.errors, trace.models),
    }


def _fold_all() -> retention.FoldReport:
    return retention.runs_fold(finished_before=timezone.now() + timedelta(seconds=1))


def _chunks(run) -> list[dict]:
    return list(run.events.filter(type=RunEvent.Type.LLM_CHUNK).values_list("data", flat=True))


def test_a_folded_turn_renders_as_before_and_stores_its_answer_once(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.01
    scripted_model.add(
        Text(call("create_artifact", id="notes", title="Notes", content="WAL notes"), reasoning="Plan: write notes."),
        Text(ANSWER, chunk_size=4, delay=0.002, reasoning="Readers and a writer. " * 5),
    )
    _, run = _turn(user)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and len(_chunks(run)) > 10
    assert TURN in run.checkpoint
    before = _shown(user, run)
    assert "Readers and a writer." in before["page"]

    report = _fold_all()

    run.refresh_from_db()
    assert (report.runs, report.chunks_kept) == (1, 0) and report.chunks_deleted > 10
    assert _chunks(run) == [] and run.folded_at is not None and run.checkpoint == {}
    # The answer is the message's alone; the call that wrote the note keeps its text.
    [complete] = run.events.filter(type=RunEvent.Type.COMPLETE)
    assert "response" not in complete.data and report.answers_removed == 3
    first, last = run.events.filter(type=RunEvent.Type.LLM_COMPLETE)
    assert first.data["content"].startswith("<tool_call>") and "content" not in last.data
    assert _shown(user, run) == before


def test_an_interrupted_call_keeps_its_streamed_text_in_one_row(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0
    broken = "The beginning of an answer that never"
    scripted_model.add(*(Drop(broken, chunk_size=4) for _ in range(3)))
    _, run = _turn(user)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and len(_chunks(run)) > 3
    before = _shown(user, run)

    _fold_all()

    # One row per broken call (two were asked again, the third failed the run), each its whole text.
    assert _chunks(run) == [{"content": broken}] * 3
    assert _shown(user, run) == before


@pytest.mark.django_db(transaction=True)
def test_a_turn_stopped_mid_stream_keeps_what_the_page_showed(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0
    scripted_model.add(Text(ANSWER, chunk_size=4, delay=0.01, reasoning="Thinking first."))
    message, run = _turn(user)

    def stop_at_the_answer(event):
        if event.type == RunEvent.Type.LLM_CHUNK and event.data["content"]:
            Run.objects.filter(pk=run.pk).update(cancel_requested=True)

    run_execute(run_id=run.pk, on_event=stop_at_the_answer)
    run.refresh_from_db()
    message.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and message.response
    streamed = _chunks(run)
    before = _shown(user, run)

    _fold_all()

    [kept] = _chunks(run)
    assert kept["content"] == "".join(c["content"] for c in streamed)
    assert kept["reasoning"] == "".join(c.get("reasoning", "") for c in streamed) == "Thinking first."
    assert _shown(user, run) == before


@pytest.mark.events_by_hand
@pytest.mark.parametrize("status", Run.ACTIVE_STATUSES)
def test_a_run_that_may_resume_is_never_folded(status):
    long_ago = timezone.now() - timedelta(days=30)
    run = RunFactory(status=status, finished_at=long_ago, checkpoint={TURN: {"frames": []}})
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, type=RunEvent.Type.LLM_CHUNK, agent="lead_agent", data={"content": "x"})
        for seq in range(1, 4)
    )

    assert _fold_all().runs == 0
    run.refresh_from_db()
    assert len(_chunks(run)) == 3 and run.checkpoint and run.folded_at is None


def test_folding_twice_changes_nothing_and_only_runs_ended_long_enough_ago_are_folded(user, scripted_model, settings):
    settings.RUN_FOLD_AFTER_MINUTES = 10
    scripted_model.add(Text(ANSWER, chunk_size=8, reasoning="Hm."))
    _, run = _turn(user)
    run_execute(run_id=run.pk)

    assert retention.retention_sweep()["folded"] == 0
    assert _chunks(run)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(minutes=11))
    assert retention.retention_sweep()["folded"] == 1
    events = list(run.events.values_list("seq", "type", "data"))
    run.refresh_from_db()
    folded_at = run.folded_at

    assert retention.retention_sweep()["folded"] == 0
    report = retention.FoldReport()
    retention.run_fold(run=Run.objects.get(pk=run.pk), report=report)
    assert (report.chunks_deleted, report.chunks_kept, report.answers_removed) == (0, 0, 0)
    assert list(run.events.values_list("seq", "type", "data")) == events
    run.refresh_from_db()
    assert run.folded_at >= folded_at


@pytest.mark.django_db(transaction=True)
def test_a_recovered_run_is_left_alone_and_still_resumes(user, scripted_model, settings):
    scripted_model.add(Text(call("create_artifact", id="notes", content="kept")), Text("Lost."), Text("Final answer."))
    _, run = _turn(user)

    def die_in_the_second_step(event):
        if event.type == RunEvent.Type.LLM_CHUNK and run.events.filter(type=RunEvent.Type.LLM_COMPLETE).exists():
            raise _WorkerKilled

    with pytest.raises(_WorkerKilled):
        run_execute(run_id=run.pk, on_event=die_in_the_second_step)
    _stale(run, settings, finished_at=timezone.now() - timedelta(days=1))
    assert runs_sweep()["recovered"] == 1
    checkpoint = Run.objects.get(pk=run.pk).checkpoint

    assert _fold_all().runs == 0
    assert Run.objects.get(pk=run.pk).checkpoint == checkpoint
    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.message.response) == (Run.Status.COMPLETED, "Final answer.")
    assert _fold_all().runs == 1


def test_idle_conversations_lose_their_events_only_when_retention_days_are_set(user, scripted_model, settings):
    scripted_model.add(Text(ANSWER, reasoning="Hm."), Text("Recent."))
    message, old = _turn(user)
    run_execute(run_id=old.pk)
    _, recent = _turn(user, "Another question")
    run_execute(run_id=recent.pk)
    message.conversation.__class__.objects.filter(pk=message.conversation_id).update(
        updated_at=timezone.now() - timedelta(days=100)
    )
    settings.RUN_EVENT_RETENTION_DAYS = None
    assert retention.retention_sweep()["expired"] == 0

    settings.RUN_EVENT_RETENTION_DAYS = 90
    assert retention.retention_sweep()["expired"] > 0

    assert not old.events.exists() and recent.events.exists()
    client = Client()
    client.force_login(user)
    assert "Write-ahead logging" in client.get(message.conversation.get_absolute_url()).text


def test_an_administrators_fold_is_counted_then_handed_to_a_worker(
    user, scripted_model, django_capture_on_commit_callbacks
):
    from django_q.models import OrmQ

    scripted_model.add(Text(ANSWER))
    _, run = _turn(user)
    run_execute(run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=40))

    assert retention.runs_fold_requested(older_than_days=30) == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert retention.runs_fold_requested(older_than_days=30, enqueue=True) == 1
    [queued] = OrmQ.objects.all()
    assert (queued.func(), queued.task["args"]) == ("agents.tasks.runs_fold", (30,))
    assert _chunks(run)

    from agents.tasks import runs_fold

    assert runs_fold(30) == 1 and not _chunks(run)
    with pytest.raises(ValueError):
        retention.runs_fold_requested(older_than_days=-1)


def test_the_retention_command_folds_what_is_due(user, scripted_model):
    scripted_model.add(Text(ANSWER))
    _, run = _turn(user)
    run_execute(run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(hours=1))

    call_command("retention", verbosity=0)

    assert not _chunks(run)
