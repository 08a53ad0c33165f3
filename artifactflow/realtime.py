"""How workers and web requests tell a conversation's open pages that something
changed (and a user's, that their session ended): the groups websockets listen
on, the message types their consumer (live.consumers) handles, and one way to
send, after the commit it describes.

Messages are wake-up calls. The database is the truth: a consumer reads what
changed from it, so a message lost on the way is healed by the next one or by
a reconnect, and sending never blocks or fails its caller.
"""

import asyncio
import contextvars
import logging
import os
import threading
import time

from channels.layers import channel_layers
from django.db import transaction

logger = logging.getLogger(__name__)

# A run wrote event rows (fields: run_id, seq). Handled by ConversationConsumer.run_event.
RUN_EVENT = "run.event"
# Streamed text not yet in the event log (fields: run_id; seq, the row it
# will be written in; agent; at, how much of that row's content and reasoning
# went before; content; reasoning). The one message that carries data rather
# than waking a reader: a page shows a token without the database, which
# keeps one row per second of text. Handled by ConversationConsumer.run_delta.
RUN_DELTA = "run.delta"
# The conversation's artifacts or their working copies changed. Handled by
# ConversationConsumer.artifacts_changed.
ARTIFACTS_CHANGED = "artifacts.changed"
# The conversation's title changed (field: title), as its model proposed it
# (agents.titling). Handled by ConversationConsumer.title_changed.
TITLE_CHANGED = "title.changed"
# Sent to a user's group. A session signed out (field: session, its tag):
# the websockets opened with it close. Handled by ConversationConsumer.session_ended.
SESSION_ENDED = "session.ended"
# The user's password or account changed: each websocket checks its session
# again. Handled by ConversationConsumer.session_changed.
SESSION_CHANGED = "session.changed"
# Who may read the conversation changed (a share went, or someone left a
# group it is shared with): sent to the conversation's group. Each viewer's
# websocket checks its access again and closes when it has none. Handled by
# ConversationConsumer.shares_changed.
SHARES_CHANGED = "shares.changed"

# Sent to a user's group. A run of the user's conversation (field:
# conversation_id) started, paused for their approval, resumed or ended, or
# they looked at the conversation: each of their pages reads its marks again.
# Handled by live.consumers.RunStateMixin.run_state.
RUN_STATE = "run.state"

# Sends still on their way; beyond this a stalled layer drops new wake-ups
# rather than queueing without bound.
MAX_PENDING = 1000


def conversation_group(conversation_id) -> str:
    return f"conversation-{conversation_id}"


def user_group(user_id) -> str:
    """The group every websocket of the user listens on, whatever its conversation."""
    return f"user-{user_id}"


def event_send_on_commit(*, conversation_id, type: str, **fields) -> None:
    """Announce `type` to the conversation's pages once the current transaction
    commits (at once outside a transaction); a rollback announces nothing."""
    group_send_on_commit(group=conversation_group(conversation_id), type=type, **fields)


def group_send_on_commit(*, group: str, type: str, **fields) -> None:
    """event_send_on_commit to any group."""
    message = {"type": type, **fields}
    # Robust: the commit this announces has happened, whatever befalls the
    # announcement, and its caller goes on.
    transaction.on_commit(lambda: _publisher().send(group, message), robust=True)


def publisher_busy() -> bool:
    """True while this process's sends queue up (a slow layer, many streams):
    streamed text is then sent in larger, fewer pieces."""
    return _instance is not None and _instance.pending > MAX_PENDING // 10


class _Publisher:
    """One event loop thread per process with a channel layer of its own, so a
    Redis layer keeps its connection across messages, a web request hands its
    message over without waiting, and no loop is bound to any request's thread."""

    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self._layer = channel_layers.make_backend("default")
        self._pending = 0
        self._lock = threading.Lock()
        # Whether the last send failed: a layer that is down (Redis gone) is
        # logged when it goes and when it comes back, not at every wake-up.
        self._failing = False
        self._thread = threading.Thread(target=self._loop.run_forever, name="realtime-publisher", daemon=True)
        self._thread.start()

    def send(self, group: str, message: dict) -> None:
        with self._lock:
            if self._pending >= MAX_PENDING:
                logger.warning("Dropped a wake-up for %s: %s sends are still pending", group, self._pending)
                return
            self._pending += 1
        # In a context of its own: one copied from a web request would carry
        # asgiref's executor for that request's thread, which is gone by the
        # time the layer's database calls run ("CurrentThreadExecutor already quit").
        self._loop.call_soon_threadsafe(self._start, group, message, context=contextvars.Context())

    @property
    def pending(self) -> int:
        return self._pending

    def close(self, *, timeout: float = 5.0) -> None:
        """Stop once the sends under way are done, or after `timeout`."""
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline:
            time.sleep(0.01)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            # A Redis layer closes its connections with the loop.
            self._loop.close()

    def _start(self, group: str, message: dict) -> None:
        self._loop.create_task(self._layer.group_send(group, message)).add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task) -> None:
        with self._lock:
            self._pending -= 1
        if task.cancelled():
            return
        error = task.exception()
        if error is not None and not self._failing:
            logger.warning("Could not announce a change; pages poll until the channel layer is back", exc_info=error)
        elif error is None and self._failing:
            logger.warning("The channel layer is back; changes are announced again")
        self._failing = error is not None


_instance: _Publisher | None = None
_instance_lock = threading.Lock()


def _publisher() -> _Publisher:
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = _Publisher()
        return _instance


def publisher_reset() -> None:
    """Stop this process's publisher once its sends are done: the next send
    starts one on the channel layer settings of the moment (for tests that
    point the layer elsewhere). Also when the process exits."""
    global _instance
    with _instance_lock:
        publisher, _instance = _instance, None
    if publisher is not None:
        publisher.close()


# The publisher's thread is a daemon, which the interpreter stops wherever it is
# at exit: a process that lives for one change (manage.py shell, a management
# command) would end before its wake-up left, and open pages would hear of it
# only at their next periodic check. So the process waits for its sends once
# its main thread is done. Not with atexit, which comes too late: by then
# concurrent.futures refuses new work, and a layer that reaches its database
# through asgiref's thread (the embedded SQLite layer) could send nothing. The
# threading module's exit hooks run before that one's, the latest registered
# first, and concurrent.futures registered its own on import (asgiref).
threading._register_atexit(publisher_reset)


def _publisher_forget() -> None:
    global _instance, _instance_lock
    _instance = None
    _instance_lock = threading.Lock()


# A forked child (django-q2 forks its workers) has none of its parent's
# threads: a publisher it inherited would queue its sends for a loop that no
# longer runs, so the child starts one of its own.
os.register_at_fork(after_in_child=_publisher_forget)
