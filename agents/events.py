"""A run's event log: every event is a row, announced to the conversation's
channel-layer group once the row is committed."""

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from .models import Run, RunEvent

logger = logging.getLogger(__name__)

# The channel-layer message type the conversation consumer handles (run_event).
ANNOUNCE_TYPE = "run.event"


class GroupPublisher:
    """Sends channel-layer messages from synchronous code through one event loop
    that lives as long as the publisher, so a Redis layer keeps its connection
    instead of opening one per message."""

    def __init__(self):
        self._layer = get_channel_layer()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="group-publisher", daemon=True)
        self._thread.start()

    def send(self, group: str, message: dict) -> None:
        future = asyncio.run_coroutine_threadsafe(self._layer.group_send(group, message), self._loop)
        try:
            future.result(timeout=10)
        except Exception:
            # Announcements are wake-up calls; the event is already in the log,
            # and the next announcement or a reconnect shows it.
            logger.warning("Could not announce to %s", group, exc_info=True)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


class RunEventLog:
    """Appends a run's events; streamed text is coalesced into one llm_chunk row
    per flush interval rather than a row per token."""

    def __init__(
        self,
        *,
        run: Run,
        publisher: GroupPublisher,
        on_event: Callable[[RunEvent], None] | None = None,
        flush_seconds: float | None = None,
    ):
        self.run = run
        self._group = run.message.conversation.group_name
        self._publisher = publisher
        self._on_event = on_event
        self._flush_seconds = settings.RUN_CHUNK_FLUSH_SECONDS if flush_seconds is None else flush_seconds
        self._seq = run.events.aggregate(last=Max("seq"))["last"] or 0
        self._chunk_agent = ""
        self._chunks: list[str] = []
        self._last_write = time.monotonic()

    def emit(self, type: str, *, agent: str = "", data: dict | None = None) -> RunEvent:
        """Write one event. Inside a caller's transaction it commits (and is
        announced) with that transaction."""
        self.flush_chunks()
        return self._write(type, agent, data or {})

    def chunk(self, *, agent: str, content: str) -> None:
        if self._chunks and agent != self._chunk_agent:
            self.flush_chunks()
        self._chunk_agent = agent
        self._chunks.append(content)
        if time.monotonic() - self._last_write >= self._flush_seconds:
            self.flush_chunks()

    def flush_chunks(self) -> None:
        if self._chunks:
            content = "".join(self._chunks)
            self._chunks = []
            self._write(RunEvent.Type.LLM_CHUNK, self._chunk_agent, {"content": content})

    def _write(self, type: str, agent: str, data: dict) -> RunEvent:
        with transaction.atomic():
            event = RunEvent.objects.create(run=self.run, seq=self._seq + 1, type=type, agent=agent, data=data)
            # Every write is also the heartbeat that shows the worker is alive.
            Run.objects.filter(pk=self.run.pk).update(heartbeat_at=timezone.now())
            transaction.on_commit(lambda: self._announce(event))
        self._seq = event.seq
        self._last_write = time.monotonic()
        return event

    def announce(self, message_type: str) -> None:
        """Wake the conversation's open pages for something that is not an
        event row (the artifact working set changed)."""
        self._publisher.send(self._group, {"type": message_type, "run_id": self.run.pk})

    def _announce(self, event: RunEvent) -> None:
        self._publisher.send(
            self._group,
            {"type": ANNOUNCE_TYPE, "run_id": self.run.pk, "seq": event.seq, "event": event.type},
        )
        if self._on_event is not None:
            self._on_event(event)
