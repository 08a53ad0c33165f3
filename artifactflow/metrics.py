"""The portal's figures for Prometheus (/metrics, docs/deploy.md).

Counters and histograms are kept by every process that counts, in files of
PROMETHEUS_MULTIPROC_DIR (prometheus_client's multiprocess mode; settings
names the directory before anything imports the library): a worker's model
calls are counted in the worker and read by whichever web process is
scraped. The directory and the figures are made at the first count, not as
a process starts. What the database already holds (turns queued, waiting,
running) is read from it at scrape time by the collectors apps register
(`collector_register`)."""

import functools
import hmac
import ipaddress
import logging
import os
from pathlib import Path
from types import SimpleNamespace

from django.conf import settings
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess

logger = logging.getLogger(__name__)

_collectors = []


def collector_register(collector) -> None:
    """Adds a collector read at each scrape (prometheus_client's collect())."""
    _collectors.append(collector)


def _directory() -> Path:
    return Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])


@functools.cache
def _figures() -> SimpleNamespace:
    _directory().mkdir(mode=0o700, parents=True, exist_ok=True)
    # In no registry of this process: a scrape reads every process's files.
    unregistered = {"registry": None}
    return SimpleNamespace(
        model_call_seconds=Histogram(
            "artifactflow_model_call_seconds",
            "Model calls by model, purpose (step, compaction) and outcome (ok, error, stopped), and how long each took",
            ["model", "purpose", "outcome"],
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
            **unregistered,
        ),
        model_tokens=Counter(
            "artifactflow_model_tokens",
            "Tokens of model calls by model and kind (prompt, completion)",
            ["model", "kind"],
            **unregistered,
        ),
        turn_seconds=Histogram(
            "artifactflow_turn_seconds",
            "Turns that ended, by status (completed, failed, cancelled), from their start",
            ["status"],
            buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800),
            **unregistered,
        ),
        database_retries=Counter(
            "artifactflow_database_write_retries", "Writes retried while the database was unreachable", **unregistered
        ),
        sweep_recovered=Counter(
            "artifactflow_sweep_recovered_runs",
            "Runs the recovery sweep took back from a worker that had died",
            **unregistered,
        ),
        # One series per live process (its pid): a process's sockets go with it.
        open_websockets=Gauge(
            "artifactflow_open_websockets",
            "Websockets open in each web process",
            multiprocess_mode="liveall",
            **unregistered,
        ),
    )


def _never_failing(count):
    """A count that cannot be kept (the directory unwritable, the disk full)
    is logged and lost; the turn or the socket it counts goes on."""

    @functools.wraps(count)
    def counted(*args, **kwargs):
        try:
            count(*args, **kwargs)
        except Exception:
            logger.warning("A count for /metrics was lost (%s)", count.__name__, exc_info=True)

    return counted


@_never_failing
def model_call_observe(*, model: str, purpose: str, outcome: str, seconds: float, usage: dict | None) -> None:
    """`usage`: the tokens the service reported, if it did (a number anywhere else is not counted)."""
    figures = _figures()
    figures.model_call_seconds.labels(model, purpose, outcome).observe(seconds)
    for kind in ("prompt", "completion"):
        tokens = (usage or {}).get(f"{kind}_tokens")
        if isinstance(tokens, int) and tokens > 0:
            figures.model_tokens.labels(model, kind).inc(tokens)


@_never_failing
def turn_observe(*, status: str, seconds: float) -> None:
    _figures().turn_seconds.labels(status).observe(seconds)


@_never_failing
def database_retry_count() -> None:
    _figures().database_retries.inc()


@_never_failing
def sweep_recovered_count(*, runs: int) -> None:
    _figures().sweep_recovered.inc(runs)


@_never_failing
def websocket_opened() -> None:
    _figures().open_websockets.inc()


@_never_failing
def websocket_closed() -> None:
    _figures().open_websockets.dec()


def scrape_allowed(*, authorization: str, address: str) -> bool:
    """With ARTIFACTFLOW_METRICS_TOKEN as a bearer token, or from an address
    in ARTIFACTFLOW_METRICS_ADDRESSES; with neither set, never."""
    token = settings.METRICS_TOKEN
    if token and hmac.compare_digest(authorization.encode(), f"Bearer {token}".encode()):
        return True
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(client in network for network in settings.METRICS_NETWORKS)


def scrape() -> bytes:
    """Every process's counts and the registered collectors', in Prometheus' text format."""
    _figures()
    _dead_processes_forget()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(_directory()))
    for collector in _collectors:
        registry.register(collector)
    return generate_latest(registry)


def _dead_processes_forget() -> None:
    """A process killed before it could say so still has its live gauges'
    files (the pid ends their names): they go once it is gone."""
    for path in _directory().glob("gauge_live*_*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, path=str(_directory()))
        except PermissionError:
            pass
