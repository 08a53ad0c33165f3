import json
import logging
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from agents.models import Run, RunEvent
from agents.selectors import branch_shown_live
from agents.services.execution import run_execute, run_start
from agents.services.permissions import permission_answer
from agents.services.recovery import ARTIFACTS_NOT_RECOVERED, NOT_RECOVERED, WORKER_DIED, runs_sweep
from agents.services.runs import run_cancel
from agents.state import pending_request
from artifacts import selectors as artifact_selectors
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from tests.agents.services.test_execution import _report_saved, _tick, _ticked, _turn, _types
from tests.agents.test_engine import call
from tests.artifacts.test_manager import LARGE
from tests.factories import ConversationFactory, MessageFactory, RunFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db


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
        run_execute(run_id=run.pk, on_event=die_in_the_second_step)
    assert not Artifact.objects.exists()
    _stale(run, settings)

    assert runs_sweep() == {"recovered": 1, "expired": 0, "admitted": 0}
    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.attempts, run.message.response) == (Run.Status.COMPLETED, 2, "Final answer.")
    assert Artifact.objects.get(artifact_id="notes").content == "kept across the crash"
    assert run.events.filter(type=RunEvent.Type.METADATA, data__resumed=True).count() == 1
    assert len(scripted_model.requests) == 3


def test_a_run_whose_worker_died_twice_fails_visibly(user, scripted_model, settings):
    _, run = _turn(user)
    _stale(run, settings, attempts=2, worker_deaths=1)

    runs_sweep()

    run.refresh_from_db()
    assert (run.status, run.worker_deaths) == (Run.Status.FAILED, 2)
    assert "worker" in run.error
    assert _types(run) == ["error"]
    assert scripted_model.requests == []


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
        run_execute(run_id=run.pk, on_event=_killed_at_first_chunk_of_attempt(1))
    _stale(run, settings)
    runs_sweep()
    with pytest.raises(_WorkerKilled):
        run_execute(run_id=run.pk, on_event=_killed_at_first_chunk_of_attempt(2))
    shown = "".join(
        e.data["content"]
        for e in run.events.filter(type=RunEvent.Type.LLM_CHUNK, seq__gt=run.events.get(data__resumed=True).seq)
    )
    _stale(run, settings)

    assert runs_sweep()["recovered"] == 1

    run.refresh_from_db()
    assert (run.status, run.error, run.worker_deaths) == (Run.Status.FAILED, WORKER_DIED, 2)
    assert Artifact.objects.get(artifact_id="notes").content == "found before the crashes"
    assert shown and run.message.response == shown.strip()
    error = run.events.get(type=RunEvent.Type.ERROR)
    assert error.data["artifacts"] == {"flushed": ["notes"], "conflicts": [], "dropped": [], "failed": {}}
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
    run_execute(run_id=run.pk)
    pending = pending_request(Run.objects.get(pk=run.pk).checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    with pytest.raises(_WorkerKilled):
        run_execute(run_id=run.pk, on_event=_killed_in_step(1))
    _stale(run, settings)

    runs_sweep()
    run_execute(run_id=run.pk)

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
        run_execute(run_id=run.pk, on_event=_killed_in_step(2))
    _stale(run, settings)
    runs_sweep()
    assert not Artifact.objects.exists()

    run_cancel(run_id=run.pk, user=user)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert Artifact.objects.get(artifact_id="notes").content == "in the checkpoint only"
    assert run.events.get(type=RunEvent.Type.ERROR).data["artifacts"]["flushed"] == ["notes"]


def test_a_worker_that_dies_while_saving_the_answer_hands_it_on_without_asking_the_model_again(
    user, scripted_model, settings
):
    scripted_model.add(Text("The answer, paid for once."))
    _, run = _turn(user)
    run_execute(run_id=run.pk)
    # What a worker leaves when it dies after the last step's checkpoint and
    # before the end is saved: the run still running, the answer unsaved.
    run.events.filter(type=RunEvent.Type.COMPLETE).delete()
    run.message.__class__.objects.filter(pk=run.message_id).update(response="")
    _stale(run, settings, finished_at=None)

    runs_sweep()
    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert (run.status, run.message.response) == (Run.Status.COMPLETED, "The answer, paid for once.")
    assert run.events.get(type=RunEvent.Type.COMPLETE).data["response"] == "The answer, paid for once."
    assert len(scripted_model.requests) == 1


def test_a_redelivered_task_of_a_dead_workers_run_queues_it_again(user, scripted_model, settings):
    _, run = _turn(user)
    _stale(run, settings, attempts=1)

    run_start(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert scripted_model.requests == []


def test_a_redelivered_task_leaves_a_live_run_alone(user, scripted_model):
    _, run = _turn(user)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())

    run_start(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert _types(run) == []


def _killed_in_step(step):
    """An on_event that kills the worker when the step's model call is logged:
    the steps before it are checkpointed, its tool has not run."""
    completions = []

    def on_event(event):
        completions.extend([event] if event.type == RunEvent.Type.LLM_COMPLETE else [])
        if len(completions) == step:
            raise _WorkerKilled

    return on_event


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_after_five_edits_resumes_with_them_though_the_cache_is_gone(user, scripted_model, settings):
    message, run = _turn(user, "Tick the first ten items")
    _report_saved(message.conversation)
    # The sixth step's model call is lost with the worker and asked again.
    scripted_model.add(*(_tick(n) for n in range(6)), *(_tick(n) for n in range(5, 10)), Text("Ticked ten."))
    with pytest.raises(_WorkerKilled):
        run_execute(run_id=run.pk, on_event=_killed_in_step(6))
    run.refresh_from_db()
    assert Artifact.objects.get(artifact_id="report").content == LARGE
    assert len(json.dumps(run.checkpoint)) < 10_000
    cache.clear()  # a restart may lose the cache: the checkpoint must not need it
    _stale(run, settings)
    runs_sweep()
    shown_on_resume = []

    def look_at_the_pane(event):
        if not shown_on_resume:
            view = artifact_selectors.artifact_get(
                branch=branch_shown_live(conversation=message.conversation),
                artifact_id="report",
            )
            shown_on_resume.append((view.live, view.content, view.version))

    run_execute(run_id=run.pk, on_event=look_at_the_pane)

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
        run_execute(run_id=run.pk, on_event=_killed_in_step(3))
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
    runs_sweep()

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    report = Artifact.objects.get(artifact_id="report")
    assert (run.status, run.message.response) == (Run.Status.COMPLETED, "Ticked three.")
    assert (report.content, report.current_version) == (_ticked(0, 1, 2), 4)
    assert len(report.versions.get(version=4).changes) == 3


@pytest.mark.django_db(transaction=True)
def test_a_run_that_cannot_be_recovered_ends_failed_and_the_sweep_recovers_the_others(
    user, scripted_model, settings, caplog
):
    first = _turn(user)[1]
    message, bad = _turn(user, "Tick the first items")
    _report_saved(message.conversation)
    scripted_model.add(_tick(0), _tick(1), _tick(2))
    with pytest.raises(_WorkerKilled):
        run_execute(run_id=bad.pk, on_event=_killed_in_step(3))
    # The version its checkpoint's edits apply to is deleted (the admin
    # deletes versions): the second death's ending cannot replay them.
    ArtifactVersion.objects.filter(artifact__artifact_id="report").delete()
    _stale(bad, settings, worker_deaths=1)
    others = [first, _turn(user)[1], _turn(user)[1]]
    for run in others:
        _stale(run, settings, attempts=1)

    with caplog.at_level(logging.ERROR, logger="agents.services.recovery"):
        assert runs_sweep() == {"recovered": 4, "expired": 0, "admitted": 0}

    for run in others:
        run.refresh_from_db()
        assert run.status == Run.Status.QUEUED
        assert _types(run) == ["metadata"]
    bad.refresh_from_db()
    assert (bad.status, bad.worker_deaths) == (Run.Status.FAILED, 2)
    assert bad.error == f"{NOT_RECOVERED} {ARTIFACTS_NOT_RECOVERED}"
    assert bad.events.get(type=RunEvent.Type.ERROR).data["message"] == bad.error
    # The working copies stay for an administrator to see.
    assert [entry["artifact_id"] for entry in bad.checkpoint["artifacts"]] == ["report"]
    logged = [r for r in caplog.records if r.exc_info and f"Run {bad.pk} could not be recovered" in r.getMessage()]
    assert len(logged) == 1


@pytest.mark.django_db(transaction=True)
def test_a_run_of_a_conversation_made_without_its_artifact_session_is_recovered_and_gets_one(
    user, scripted_model, settings
):
    scripted_model.add(Text("Answered after all."))
    # Made by a script rather than lifecycle.conversation_start: no artifact session.
    resumed, twice = (
        RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=user, session=None))) for _ in range(2)
    )
    assert not ArtifactSession.objects.exists()
    _stale(resumed, settings, attempts=1)
    _stale(twice, settings, attempts=2, worker_deaths=1)

    assert runs_sweep() == {"recovered": 2, "expired": 0, "admitted": 0}
    run_execute(run_id=resumed.pk)

    resumed.refresh_from_db()
    twice.refresh_from_db()
    assert (resumed.status, resumed.message.response) == (Run.Status.COMPLETED, "Answered after all.")
    assert (twice.status, twice.error) == (Run.Status.FAILED, WORKER_DIED)
    assert set(ArtifactSession.objects.values_list("conversation_id", flat=True)) == {
        resumed.message.conversation_id,
        twice.message.conversation_id,
    }
