"""What a probe asks of a web process (nginx, systemd, Kubernetes): whether
it answers at all, and whether the portal can serve a turn through it: its
database, its channel layer, and a worker that ran its sweep lately.

A worker's sweep runs on django-q2's schedule once a minute and as each of
its processes starts (agents.apps); each run notes the time in the cache,
which every web and worker process shares (the data directory's on SQLite,
Redis otherwise). No row is written for it."""

import logging
import time

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.cache import cache
from django.db import connection

logger = logging.getLogger(__name__)

WORKER_SEEN_KEY = "artifactflow:worker-swept"
# A group no socket joins: sending to it proves the layer takes messages.
PROBE_GROUP = "readiness-probe"


def worker_seen() -> None:
    """A worker is alive: called by its sweeps."""
    cache.set(WORKER_SEEN_KEY, time.time(), timeout=None)


def readiness_check() -> dict[str, str]:
    """Each part's state in a few words, "ok" when it is ready. Errors are
    logged here; the words never carry an address or a password."""
    return {
        "database": _answers(_database_ask, refusal="the database did not answer"),
        "channel layer": _answers(_channel_layer_ask, refusal="the channel layer refused a message"),
        "worker": _worker(),
    }


def _answers(ask, *, refusal: str) -> str:
    try:
        ask()
    except Exception:
        logger.warning("Readiness: %s", refusal, exc_info=True)
        return "unreachable"
    return "ok"


def _database_ask() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _channel_layer_ask() -> None:
    async_to_sync(get_channel_layer().group_send)(PROBE_GROUP, {"type": "readiness.probe"})


def _worker() -> str:
    try:
        swept = cache.get(WORKER_SEEN_KEY)
    except Exception:
        logger.warning("Readiness: the cache did not answer", exc_info=True)
        return "unknown: the cache is unreachable"
    if swept is None:
        return "none has swept since the cache was emptied"
    ago = time.time() - swept
    if ago > settings.READY_WORKER_SECONDS:
        return f"none has swept for {ago:.0f} s"
    return "ok"
