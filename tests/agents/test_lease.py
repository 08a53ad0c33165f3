"""A worker's lease on its run: liveness beats from a thread, and a worker the
sweep took for dead can never write beside the one that took over."""

import subprocess
import threading
import time
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from agents.lease import HOST, Heartbeat, Lease, LeaseLost, worker_gone, worker_name
from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.services.recovery import runs_sweep
from artifacts.models import Artifact, ArtifactVersion
from conversations import lifecycle
from tests import waits
from tests.agents.test_engine import call
from tests.model_server import Text

pytestmark = pytest.mark.django_db(transaction=True)


def _turn(user, content="What is WAL?"):
    conversation = lifecycle.conversation_start(user=user, content=content, enqueue=False)
    return conversation.active_branch.runs.get()


def _in_thread(run_id, results):
    def execute():
        try:
            results.append(run_execute(run_id=run_id))
        finally:
            connections.close_all()

    thread = threading.Thread(target=execute)
    thread.start()
    return thread


def test_a_model_silent_for_longer_than_the_stale_limit_keeps_its_worker_alive(user, scripted_model, settings):
    settings.RUN_HEARTBEAT_STALE = 1
    # Four stale limits of thinking before the first token.
    scripted_model.add(Text("Thought it through.", wait=4, reasoning="..."))
    run = _turn(user)
    results = []
    thread = _in_thread(run.pk, results)
    recovered = 0
    while thread.is_alive():
        recovered += runs_sweep()["recovered"]
        time.sleep(0.1)
    thread.join()

    run.refresh_from_db()
    assert recovered == 0
    assert (run.status, run.attempts, run.worker_deaths) == (Run.Status.COMPLETED, 1, 0)
    assert run.message.response == "Thought it through."
    assert len(scripted_model.requests) == 1


def test_a_worker_taken_for_dead_stops_at_its_next_write_and_its_successor_alone_saves(user, scripted_model, settings):
    settings.RUN_HEARTBEAT_STALE = 60  # the first worker beats too rarely to notice before it writes
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="written once")),
        # The first worker is streaming this when the sweep takes it for dead.
        Text("The first worker's answer, streamed slowly. " * 10, chunk_size=4, delay=0.02),
        Text("The second worker's answer."),
    )
    run = _turn(user)
    results = []
    first = _in_thread(run.pk, results)
    waits.until(lambda: run.events.filter(type=RunEvent.Type.LLM_CHUNK).exists(), timeout=10)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=2))

    assert runs_sweep()["recovered"] == 1
    second = run_execute(run_id=run.pk)
    first.join(timeout=20)

    assert results == [None] and second is not None
    run.refresh_from_db()
    assert (run.status, run.attempts, run.worker_deaths) == (Run.Status.COMPLETED, 2, 1)
    assert run.message.response == "The second worker's answer."
    assert list(ArtifactVersion.objects.filter(artifact__artifact_id="notes").values_list("version", flat=True)) == [1]
    assert Artifact.objects.get(artifact_id="notes").content == "written once"
    resumed = run.events.get(type=RunEvent.Type.METADATA, data__resumed=True).seq
    after = "".join(e.data.get("content", "") for e in run.events.filter(seq__gt=resumed, type=RunEvent.Type.LLM_CHUNK))
    assert "first worker" not in after
    assert run.events.filter(type__in=RunEvent.TERMINAL_TYPES).count() == 1
    assert list(run.events.values_list("seq", flat=True)) == list(range(1, run.events.count() + 1))


def test_a_lease_holds_only_while_the_run_runs_under_its_attempt(user):
    run = _turn(user)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, attempts=2)

    # As a worker holds it: first thing in each of its write transactions.
    with transaction.atomic():
        Lease(run_id=run.pk, attempt=2).hold()
    with pytest.raises(LeaseLost), transaction.atomic():
        Lease(run_id=run.pk, attempt=1).hold()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)
    with pytest.raises(LeaseLost), transaction.atomic():
        Lease(run_id=run.pk, attempt=2).hold()


def test_the_heartbeat_notices_the_lease_is_lost(user):
    run = _turn(user)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, attempts=1)
    with Heartbeat(Lease(run_id=run.pk, attempt=1), interval=0.05) as heartbeat:
        time.sleep(0.2)
        assert not heartbeat.lost
        Run.objects.filter(pk=run.pk).update(attempts=2)
        waits.until(lambda: heartbeat.lost, timeout=2)


@pytest.mark.processes
def test_a_process_of_this_host_that_is_gone_is_known_to_be_gone():
    finished = subprocess.Popen(["true"])
    finished.wait()

    assert worker_gone(f"{HOST}:{finished.pid}")
    assert not worker_gone(worker_name())
    # Another host's process may be alive whatever its pid: only its heartbeat tells.
    assert not worker_gone(f"another-host:{finished.pid}")
