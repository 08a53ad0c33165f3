"""Faults with real processes: a django-q2 cluster on the test database, killed
with SIGKILL or cut off from its database, and the scripted model over HTTP.
Each turn must end truthfully within seconds, run its model calls once and
save its artifacts once."""

import os
import signal
import sqlite3
import time

import pytest
from django.db import connection

from agents.models import Run, RunEvent
from artifacts.models import ArtifactVersion
from conversations import lifecycle
from tests import waits
from tests.agents.test_engine import call
from tests.model_server import Text
from tests.processes import Cluster, TcpProxy, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.faults]

# Far beyond every wait below: only the start-up sweep or a retry can explain a recovery.
STALE = "600"
SLOW_ANSWER = "A long answer, streamed slowly enough to be cut. " * 12
ANSWER = "## Findings\n\nWAL lets readers run beside one writer. " * 10


@pytest.fixture
def clusters(scripted_model, tmp_path):
    started = []

    def start(**options) -> Cluster:
        env = {"ARTIFACTFLOW_HEARTBEAT_STALE": STALE, **options.pop("env", {})}
        cluster = Cluster(
            model_url=scripted_model.url,
            model=scripted_model.model,
            log=tmp_path / f"qcluster-{len(started)}.log",
            env=env,
            **options,
        )
        started.append(cluster.start())
        return cluster

    yield start
    for cluster in started:
        cluster.kill()


def _until(condition, *, timeout: float, clusters: list[Cluster] = ()):
    timeout = waits.seconds(timeout)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(c.log_tail() for c in clusters)
            pytest.fail(f"not within {timeout} s\n{logs}")
        time.sleep(0.05)


def _ask(user, content="Research WAL"):
    conversation = lifecycle.conversation_start(user=user, content=content)
    return conversation.active_branch.runs.get()


def _status(run):
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def _streaming(run):
    return run.events.filter(type=RunEvent.Type.LLM_CHUNK).exists()


def _retried(cluster: Cluster) -> bool:
    """Whether the worker met the fault: a write failed and it is trying again (artifactflow.db)."""
    return "Database error while writing" in cluster.log.read_text(errors="replace")


def _saved_once(artifact_id):
    return list(
        ArtifactVersion.objects.filter(artifact__artifact_id=artifact_id).values_list("version", flat=True)
    ) == [1]


def _kill_the_cluster_and_start_another(cluster, run, clusters):
    cluster.kill()
    return [cluster, clusters()]


def _kill_the_worker_process(cluster, run, clusters):
    # The cluster's guard replaces the process, and the new one sweeps as it starts.
    os.kill(int(Run.objects.get(pk=run.pk).worker.rpartition(":")[2]), signal.SIGKILL)
    return [cluster]


@pytest.mark.parametrize("kill", [_kill_the_cluster_and_start_another, _kill_the_worker_process])
def test_a_worker_killed_mid_turn_is_replaced_and_its_turn_resumed_at_once(user, scripted_model, clusters, kill):
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="written before the kill")),
        Text(SLOW_ANSWER, chunk_size=4, delay=0.02),
        Text("The answer after the kill."),
    )
    cluster = clusters()
    run = _ask(user)
    _until(lambda: _streaming(run), timeout=30, clusters=[cluster])

    killed = time.monotonic()
    running = kill(cluster, run, clusters)
    _until(lambda: _status(run) == Run.Status.COMPLETED, timeout=30, clusters=running)

    run.refresh_from_db()
    assert time.monotonic() - killed < 30
    assert (run.attempts, run.worker_deaths) == (2, 1)
    assert run.message.response == "The answer after the kill."
    assert _saved_once("notes")
    assert len(scripted_model.requests) == 3


def test_a_worker_killed_while_it_holds_ten_turns_resumes_each_once(user, scripted_model, clusters, settings):
    # One process (ARTIFACTFLOW_WORKERS=1) runs all ten side by side; one
    # person's ten, so no per-person limit here.
    settings.TURNS_PER_USER = 0
    scripted_model.add(*[Text(SLOW_ANSWER, chunk_size=4, delay=0.05) for _ in range(10)])
    scripted_model.add(*[Text("The answer after the kill.") for _ in range(10)])
    cluster = clusters()
    runs = [_ask(user, f"Research WAL, part {i}") for i in range(10)]
    _until(lambda: all(_streaming(run) for run in runs), timeout=60, clusters=[cluster])
    workers = set(Run.objects.filter(pk__in=[run.pk for run in runs]).values_list("worker", flat=True))
    assert len(workers) == 1

    os.kill(int(workers.pop().rpartition(":")[2]), signal.SIGKILL)
    _until(lambda: all(_status(run) == Run.Status.COMPLETED for run in runs), timeout=60, clusters=[cluster])

    for run in runs:
        run.refresh_from_db()
        assert (run.attempts, run.worker_deaths) == (2, 1)
        assert run.message.response == "The answer after the kill."
        assert run.events.filter(type=RunEvent.Type.COMPLETE).count() == 1
    assert len(scripted_model.requests) == 20


def _answer_nearly_sent(scripted_model):
    """Most of the answer is out: the outage below spans its end, the last
    chunks, the checkpoint, the artifact flush and the run's end."""
    sent = "".join(piece for _, piece in scripted_model.sent)
    start = sent.find(ANSWER[:40])
    return start >= 0 and len(sent) - start >= 0.8 * len(ANSWER)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgres_gone_for_seconds_at_the_end_of_a_turn_only_delays_it(user, scripted_model, clusters):
    settings = connection.settings_dict
    proxy = TcpProxy(target=(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)))
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="saved once")), Text(ANSWER, chunk_size=4, delay=0.01)
    )
    cluster = clusters(database=database_url(port=proxy.port))
    try:
        run = _ask(user)
        _until(lambda: _answer_nearly_sent(scripted_model), timeout=30, clusters=[cluster])
        proxy.cut()
        _until(lambda: _retried(cluster), timeout=30, clusters=[cluster])
        proxy.restore()
        restored = time.monotonic()
        _until(lambda: _status(run) == Run.Status.COMPLETED, timeout=30, clusters=[cluster])
        assert time.monotonic() - restored < 15
    finally:
        proxy.close()
    _assert_completed_once(run, scripted_model)


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_sqlite_locked_for_seconds_at_the_end_of_a_turn_only_delays_it(user, scripted_model, clusters):
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="saved once")), Text(ANSWER, chunk_size=4, delay=0.01)
    )
    # The worker gives up on a lock after 0.5 s, so the lock below is an error it must ride out.
    cluster = clusters(env={"ARTIFACTFLOW_SQLITE_BUSY_TIMEOUT": "0.5"})
    run = _ask(user)
    _until(lambda: _answer_nearly_sent(scripted_model), timeout=30, clusters=[cluster])
    blocker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        _until(lambda: _retried(cluster), timeout=30, clusters=[cluster])
    finally:
        blocker.execute("COMMIT")
        blocker.close()
    released = time.monotonic()
    _until(lambda: _status(run) == Run.Status.COMPLETED, timeout=30, clusters=[cluster])
    assert time.monotonic() - released < 15
    _assert_completed_once(run, scripted_model)


def _assert_completed_once(run, scripted_model):
    run.refresh_from_db()
    assert (run.attempts, run.worker_deaths) == (1, 0)
    assert run.message.response == ANSWER.strip()
    assert run.events.filter(type=RunEvent.Type.COMPLETE).count() == 1
    assert _saved_once("notes")
    assert len(scripted_model.requests) == 2
