"""A worker's hold on the run it executes.

A claim makes a worker the run's only writer: it sets the run running under a
new attempt number. Every write the worker makes first checks, in the write's
own transaction, that the run is still running under that attempt (`hold`),
so a worker the sweep took for dead and replaced can never write beside its
successor; it stops at its next write or check (LeaseLost).

Liveness is a thread that refreshes the run's heartbeat while the turn
executes, whatever the turn is doing: a model may think silently for minutes,
and a heartbeat written only with output would let the sweep take that live
worker for dead.
"""

import logging
import os
import socket
import threading
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from .models import Run

logger = logging.getLogger(__name__)

HOST = socket.gethostname()


class LeaseLost(Exception):
    """The run is no longer running under this worker's claim: the sweep took
    the worker for dead and queued the run again, or it was ended."""


@dataclass(frozen=True)
class Lease:
    run_id: int
    attempt: int

    def hold(self, **fields) -> None:
        """Refresh the heartbeat (and set `fields` on the run) if the run is
        still this worker's, else raise LeaseLost. Called first inside each of
        the worker's write transactions, where the row lock it takes keeps the
        sweep out until the commit."""
        held = Run.objects.filter(pk=self.run_id, attempts=self.attempt, status=Run.Status.RUNNING).update(
            heartbeat_at=timezone.now(), **fields
        )
        if not held:
            raise LeaseLost(f"run {self.run_id} is no longer held by attempt {self.attempt}")


class Heartbeat:
    """Refreshes the lease every quarter of RUN_HEARTBEAT_STALE from a thread of
    its own while the `with` block runs. `lost` turns true once the lease is
    gone; a database error only skips a beat."""

    def __init__(self, lease: Lease, *, interval: float | None = None):
        self.lease = lease
        self.interval = settings.RUN_HEARTBEAT_STALE / 4 if interval is None else interval
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-run-{lease.run_id}", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        # A beat stuck on an unreachable database must not hold the worker.
        self._thread.join(timeout=10)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.lease.hold()
                except LeaseLost:
                    self.lost = True
                    return
                except DatabaseError as error:
                    logger.warning("Heartbeat of run %s skipped: %s", self.lease.run_id, error)
                    connection.close()
        finally:
            # The thread's own connection; it would otherwise stay open.
            connection.close()


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
