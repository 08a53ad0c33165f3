"""Riding out a database that goes away for a few seconds.

A worker that loses its database at the end of a turn should not strand the
run: its writes are retried, on a fresh connection, for a bounded time
(DB_RETRY_SECONDS) before the error is let through.
"""

import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from artifactflow import metrics

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A dropped connection, a server restarting, SQLite's lock held past its busy timeout.
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
FIRST_DELAY, MAX_DELAY = 0.1, 5.0


def transient_retry(write: Callable[[], T], *, what: str, seconds: float | None = None) -> T:
    """`write()`, tried again with backoff while it fails with a transient error,
    for up to `seconds` (DB_RETRY_SECONDS). `write` must be safe to repeat: each
    call runs its own transaction (a savepoint inside a caller's), and one whose
    commit went through but was reported lost must notice that it was written."""
    deadline = time.monotonic() + (settings.DB_RETRY_SECONDS if seconds is None else seconds)
    delay = FIRST_DELAY
    while True:
        try:
            return write()
        except TRANSIENT_ERRORS as error:
            if time.monotonic() + delay > deadline:
                raise
            logger.warning("Database error while writing %s, retrying in %.1f s: %s", what, delay, error)
            metrics.database_retry_count()
        if not connection.in_atomic_block:
            # The broken connection is dropped; the next query opens a new one.
            # A caller's transaction keeps its own: only a lock can pass there.
            connection.close()
        time.sleep(delay)
        delay = min(delay * 2, MAX_DELAY)


# The pools a forked process inherited, kept referenced: their connections are
# its parent's sockets, and are neither used nor closed here.
_inherited_pools: list = []


def _pools_drop_inherited() -> None:
    from django.db.backends.postgresql.base import DatabaseWrapper

    _inherited_pools.extend(DatabaseWrapper._connection_pools.values())
    DatabaseWrapper._connection_pools.clear()


def pool_fork_guard() -> None:
    """Makes a forked child open a connection pool of its own. django-q2 forks
    its workers from a process that has used the database (the schedule, a
    worker's reincarnation): a child that took its parent's idle pooled
    connections would talk over the parent's sockets, interleaving both
    processes' queries on one server session."""
    if any(database.get("OPTIONS", {}).get("pool") for database in settings.DATABASES.values()):
        os.register_at_fork(after_in_child=_pools_drop_inherited)


def connection_release() -> None:
    """Give this thread's connection back to its process's pool, outside a
    transaction: a worker's turn writes a few times a second and waits on its
    model in between, so its many turns share a few connections rather than
    hold one each. Without a pool (SQLite) the connection stays."""
    if settings.DATABASES["default"].get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()
