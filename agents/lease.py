"""A worker's hold on the run it executes.

A claim makes a worker the run's only writer: it sets the run running under a
new attempt number. Every write the worker makes first checks, in the write's
own transaction, that the run is still running under that attempt (`hold`),
so a worker the sweep took for dead and replaced can never write beside its
successor; it stops at its next write or check (LeaseLost).

Liveness is a thread that refreshes the run's heartbeat while the turn
executes, whatever the turn is doing: a model may think silently for minutes,
and a heartbeat written only with output would let the sweep take that live
worker for dead. One such thread serves every turn a process runs.
"""

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from artifactflow.db import connection_release

from .models import Run

logger = logging.getLogger(__name__)

# How soon a worker sees a Stop the user pressed: its turns check a flag the
# watcher refreshes this often, with one query for all of them.
CANCEL_POLL_SECONDS = 0.25

HOST = socket.gethostname()


class LeaseLost(Exception):
    """The run is no longer running under this worker's claim: the sweep took
    the worker for dead and queued the run again, or it was ended."""


@dataclass(frozen=True)
class Lease:
    run_id: int
    attempt: int

    def hold(self, **fields) -> None:
        """Raise LeaseLost unless the run is still this worker's, and set
        `fields` on it if given. Called first inside each of the worker's write
        transactions, where the row lock it takes keeps the sweep out until the
        commit. Without fields it writes nothing: the heartbeat is the
        watcher's (Heartbeat), so a streamed chunk costs one row, not two."""
        held = Run.objects.filter(pk=self.run_id, attempts=self.attempt, status=Run.Status.RUNNING)
        if fields:
            found = held.update(**fields)
        else:
            found = held.select_for_update().values_list("pk", flat=True).first() is not None
        if not found:
            raise LeaseLost(f"run {self.run_id} is no longer held by attempt {self.attempt}")


class Heartbeat:
    """A held run's liveness and Stop, while the `with` block runs: its lease is
    refreshed every quarter of RUN_HEARTBEAT_STALE and its cancel flag read
    every CANCEL_POLL_SECONDS, for every run the process holds at once, by one
    thread (`_Watcher`): a process running many turns keeps one connection for
    this, not one per turn, and a turn's Stop costs it no query. `lost` turns
    true once the lease is gone; a database error only skips a beat."""

    def __init__(self, lease: Lease, *, interval: float | None = None):
        self.lease = lease
        self.interval = settings.RUN_HEARTBEAT_STALE / 4 if interval is None else interval
        self.lost = False
        self.cancelled = False
        self.due = 0.0

    def __enter__(self) -> "Heartbeat":
        # Read once here: a Stop that came before the turn started is seen at its first check.
        self.cancelled = Run.objects.filter(pk=self.lease.run_id, cancel_requested=True).exists()
        self.due = time.monotonic() + self.interval
        _watcher().add(self)
        return self

    def __exit__(self, *exc) -> None:
        _watcher().discard(self)


class _Watcher:
    """The thread that beats and watches every Heartbeat of this process."""

    def __init__(self):
        self._held: set[Heartbeat] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="lease-watcher", daemon=True)
        self._thread.start()

    def add(self, heartbeat: Heartbeat) -> None:
        with self._lock:
            self._held.add(heartbeat)
        self._wake.set()

    def discard(self, heartbeat: Heartbeat) -> None:
        with self._lock:
            self._held.discard(heartbeat)

    def _watch(self) -> None:
        while True:
            with self._lock:
                held = list(self._held)
            if not held:
                # Nothing to watch: its connection is not kept idle.
                connection.close()
                self._wake.wait()
                self._wake.clear()
                continue
            try:
                self._tick(held)
                connection_release()
            except DatabaseError as error:
                logger.warning("Heartbeats of runs %s skipped: %s", [h.lease.run_id for h in held], error)
                connection.close()
            except Exception:
                # Whatever it is, the thread goes on: every turn of the process depends on it.
                logger.exception("Heartbeats of runs %s failed", [h.lease.run_id for h in held])
                connection.close()
            soonest = min(h.due for h in held) - time.monotonic()
            self._wake.wait(max(0.0, min(CANCEL_POLL_SECONDS, soonest)))
            self._wake.clear()

    def _tick(self, held: list[Heartbeat]) -> None:
        now = time.monotonic()
        for heartbeat in held:
            if heartbeat.lost or heartbeat.due > now:
                continue
            heartbeat.due = now + heartbeat.interval
            try:
                heartbeat.lease.hold(heartbeat_at=timezone.now())
            except LeaseLost:
                heartbeat.lost = True
        cancelled = set(
            Run.objects.filter(pk__in=[h.lease.run_id for h in held], cancel_requested=True).values_list(
                "pk", flat=True
            )
        )
        for heartbeat in held:
            heartbeat.cancelled = heartbeat.cancelled or heartbeat.lease.run_id in cancelled


_watcher_instance: _Watcher | None = None
_watcher_lock = threading.Lock()


def turns_held() -> int:
    """How many turns this process runs now."""
    return len(_watcher_instance._held) if _watcher_instance is not None else 0


def _watcher() -> _Watcher:
    global _watcher_instance
    with _watcher_lock:
        if _watcher_instance is None:
            _watcher_instance = _Watcher()
        return _watcher_instance


def worker_name() -> str:
    """This process, as Run.worker names it."""
    return f"{HOST}:{os.getpid()}"


def worker_gone(name: str) -> bool:
    """True when `name` is a process of this host that no longer exists. A
    process of another host is never known to be gone: only its heartbeat tells."""
    host, _, pid = name.rpartition(":")
    if host != HOST or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _zombie(int(pid))


def _zombie(pid: int) -> bool:
    # A killed worker whose parent died too waits for init to reap it, which a
    # container's init may never do; it still answers os.kill.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False
