"""/metrics (artifactflow.metrics): who may scrape it, and what it says after
a turn a real worker process ran, a socket opened and closed, a process
killed with sockets open and a dead worker's run recovered."""

import asyncio
import ipaddress
import os
import signal

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.services.recovery import runs_sweep
from artifactflow import metrics
from conversations import lifecycle
from tests import waits
from tests.agents.services.test_execution import _turn
from tests.agents.services.test_recovery import _stale
from tests.asgi import conversation_socket, session_cookie
from tests.model_server import Text
from tests.processes import Cluster

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "a-scrapers-token-0123456789"


@pytest.fixture(autouse=True)
def scraper(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_NETWORKS = []


def _scrape() -> dict[tuple, float]:
    """Each sample's value by its name and labels."""
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def _value(scraped: dict, name: str, **labels) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def test_only_a_scraper_with_the_token_or_from_an_allowed_address_finds_the_figures(client, settings):
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200

    settings.METRICS_TOKEN = ""
    settings.METRICS_NETWORKS = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1")]
    assert client.get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.2").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404
    assert client.post("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 405


@pytest.mark.processes
def test_a_turn_a_worker_process_ran_is_counted_by_its_model_and_its_end(user, scripted_model, tmp_path):
    before = _scrape()
    scripted_model.add(Text("Heat pumps move heat rather than make it. 热泵搬运热量。 " * 30))
    conversation = lifecycle.conversation_start(user=user, content="How do heat pumps work? 热泵如何工作?")
    run = conversation.active_branch.runs.get()
    assert (
        _value(_scrape(), "artifactflow_turns", state="queued")
        == _value(before, "artifactflow_turns", state="queued") + 1
    )

    cluster = Cluster(model_url=scripted_model.url, model=scripted_model.model, log=tmp_path / "worker.log").start()
    ended = _value(before, "artifactflow_turn_seconds_count", status="completed") + 1
    try:
        waits.until(lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED, timeout=60)
        # The worker counts the turn once its end is committed, a moment after.
        waits.until(
            lambda: _value(_scrape(), "artifactflow_turn_seconds_count", status="completed") == ended, timeout=10
        )
    finally:
        cluster.kill()
    after = _scrape()

    usage = run.events.get(type=RunEvent.Type.LLM_COMPLETE).data["token_usage"]
    model = scripted_model.model
    for kind in ("prompt", "completion"):
        counted = _value(after, "artifactflow_model_tokens_total", model=model, kind=kind)
        assert (
            counted - _value(before, "artifactflow_model_tokens_total", model=model, kind=kind)
            == usage[f"{kind}_tokens"]
        )
    call = {"model": model, "purpose": "step", "outcome": "ok"}
    assert (
        _value(after, "artifactflow_model_call_seconds_count", **call)
        - _value(before, "artifactflow_model_call_seconds_count", **call)
        == 1
    )
    assert _value(after, "artifactflow_turns", state="queued") == _value(before, "artifactflow_turns", state="queued")
    assert _value(after, "artifactflow_turns", state="running") == 0


def test_a_service_that_reports_no_usage_or_odd_figures_is_counted_without_tokens(user, scripted_model):
    model = scripted_model.model
    before = _scrape()
    scripted_model.add(
        Text("An answer without usage.", usage=False),
        Text(
            "An answer with odd figures.",
            usage_sent={"prompt_tokens": "many", "completion_tokens": 12, "total_tokens": None},
        ),
    )

    for _ in range(2):
        _, run = _turn(user)
        assert run_execute(run_id=run.pk).status == Run.Status.COMPLETED
    after = _scrape()

    call = {"model": model, "purpose": "step", "outcome": "ok"}
    assert (
        _value(after, "artifactflow_model_call_seconds_count", **call)
        == _value(before, "artifactflow_model_call_seconds_count", **call) + 2
    )
    assert _value(after, "artifactflow_model_tokens_total", model=model, kind="prompt") == _value(
        before, "artifactflow_model_tokens_total", model=model, kind="prompt"
    )


async def test_an_open_websocket_is_counted_in_its_process_until_it_closes(user):
    conversation = await sync_to_async(lifecycle.conversation_start)(user=user, content="Q?", enqueue=False)
    client = Client()
    await sync_to_async(client.force_login)(user)
    here = ("artifactflow_open_websockets", frozenset({("pid", str(os.getpid()))}))
    before = (await sync_to_async(_scrape)()).get(here, 0.0)
    communicator = conversation_socket(conversation.pk, cookie=session_cookie(client))
    connected, _ = await communicator.connect()
    assert connected

    await _until_scraped(here, before + 1)
    await communicator.disconnect()
    await _until_scraped(here, before)


async def _until_scraped(sample: tuple, expected: float) -> None:
    """Waits for the scrape (in a thread: it reads the database) to show `expected`."""
    deadline = asyncio.get_running_loop().time() + waits.seconds(10)
    while (scraped := (await sync_to_async(_scrape)()).get(sample, 0.0)) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"{sample} is {scraped}, not {expected}"
        await asyncio.sleep(0.05)


def test_a_process_killed_with_sockets_open_leaves_no_count_behind():
    ready, told = os.pipe()
    child = os.fork()
    if child == 0:
        metrics.websocket_opened()
        metrics.websocket_opened()
        os.write(told, b"x")
        signal.pause()
    os.read(ready, 1)
    theirs = ("artifactflow_open_websockets", frozenset({("pid", str(child))}))
    assert _scrape()[theirs] == 2

    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)

    assert theirs not in _scrape()


def test_a_run_the_sweep_recovers_from_a_dead_worker_is_counted(user, settings):
    before = _value(_scrape(), "artifactflow_sweep_recovered_runs_total")
    _, run = _turn(user)
    _stale(run, settings)

    assert runs_sweep()["recovered"] == 1
    assert _value(_scrape(), "artifactflow_sweep_recovered_runs_total") == before + 1


def test_a_count_that_cannot_be_kept_is_lost_and_the_turn_goes_on(user, scripted_model, tmp_path, monkeypatch, caplog):
    """The counts' directory below a file: no directory can be made there."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    scripted_model.add(Text("Answered all the same."))
    with monkeypatch.context() as patched:
        patched.setenv("PROMETHEUS_MULTIPROC_DIR", str(blocker / "metrics"))
        metrics._figures.cache_clear()
        _, run = _turn(user)
        assert run_execute(run_id=run.pk).status == Run.Status.COMPLETED
        scraped = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    metrics._figures.cache_clear()

    assert "A count for /metrics was lost (model_call_observe)" in caplog.text
    assert (scraped.status_code, scraped.content) == (503, b"The counts cannot be read; the log says why.\n")
    # Counting goes on once the directory can be made again.
    before = _value(_scrape(), "artifactflow_sweep_recovered_runs_total")
    metrics.sweep_recovered_count(runs=2)
    assert _value(_scrape(), "artifactflow_sweep_recovered_runs_total") == before + 2
