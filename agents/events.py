"""A run's event log: every event is a row, announced to the conversation's
channel-layer group once the row is committed. A worker's writes are fenced
by its lease and retried while the database is briefly away."""

import time
from collections.abc import Callable

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from artifactflow import realtime
from artifactflow.db import connection_release, transient_retry

from .config import LEAD_AGENT
from .lease import Lease, turns_held
from .models import Run, RunEvent

# Turns a process runs at once before each sends its text less often.
LIVE_TURNS_AT_FULL_RATE = 16
# A live piece carries its row's text from the row's start while that is no
# longer than this (two seconds of a fast model's answer): a page that opened
# after the row began, as one does right after its question is posted, shows
# the text from its first piece rather than from the row two seconds later.
LIVE_WHOLE_ROW_CHARS = 2000


class RunEventLog:
    """Appends a run's events. Streamed text, answer and thinking alike, is
    coalesced into one llm_chunk row per flush interval (RUN_CHUNK_FLUSH_SECONDS,
    two seconds) rather than a row per token, and sent to open pages as it comes,
    every RUN_LIVE_SECONDS, straight over the channel layer (realtime.RUN_DELTA)
    and numbered by the row it will be written in: a page shows a token at
    once, and one that misses a piece reads it from that row, or from the
    next piece while the row is short (LIVE_WHOLE_ROW_CHARS)."""

    def __init__(
        self,
        *,
        run: Run,
        lease: Lease | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        flush_seconds: float | None = None,
    ):
        """`lease`: the worker's claim, checked with every write. Without one
        (the sweep, a cancel) the caller has ended the run or holds its row."""
        self.run = run
        self._lease = lease
        self._conversation_id = run.message.conversation_id
        self._on_event = on_event
        self._flush_seconds = settings.RUN_CHUNK_FLUSH_SECONDS if flush_seconds is None else flush_seconds
        self._live_seconds = settings.RUN_LIVE_SECONDS
        self._seq = run.events.aggregate(last=Max("seq"))["last"] or 0
        self._chunk_agent = ""
        self._chunks: list[str] = []
        self._thoughts: list[str] = []
        self._last_write = self._last_live = time.monotonic()
        # How much of the pending row's content and reasoning pages were sent.
        self._live_at = (0, 0)

    def emit(self, type: str, *, agent: str = "", data: dict | None = None) -> RunEvent:
        """Write one event. Inside a caller's transaction it commits (and is
        announced) with that transaction."""
        self.flush_chunks()
        return self._write(type, agent, data or {})

    def chunk(self, *, agent: str, content: str = "", reasoning: str = "") -> None:
        """Streamed answer text, or thinking (`reasoning`), of an agent's model call."""
        if (self._chunks or self._thoughts) and agent != self._chunk_agent:
            self.flush_chunks()
        self._chunk_agent = agent
        if content:
            self._chunks.append(content)
        if reasoning:
            self._thoughts.append(reasoning)
        now = time.monotonic()
        if now - self._last_write >= self._flush_seconds:
            self.flush_chunks()
        elif agent == LEAD_AGENT and now - self._last_live >= self._live_interval():
            # Pages show the lead's text as it comes; a subagent's, in its row.
            self._live_send()

    def _live_interval(self) -> float:
        """RUN_LIVE_SECONDS, longer when the process is busy: its turns
        coalesce their text harder rather than fall behind (a process of 32
        turns sends twice as seldom as one of 16), and four times longer while
        its sends queue up."""
        busy = max(1.0, turns_held() / LIVE_TURNS_AT_FULL_RATE)
        return self._live_seconds * busy * (4 if realtime.publisher_busy() else 1)

    def _live_send(self) -> None:
        content, reasoning = "".join(self._chunks), "".join(self._thoughts)
        sent_content, sent_reasoning = self._live_at
        if len(content) == sent_content and len(reasoning) == sent_reasoning:
            return
        # Joined once, not at every send.
        self._chunks, self._thoughts = [content] if content else [], [reasoning] if reasoning else []
        self._last_live = time.monotonic()
        self._live_at = (len(content), len(reasoning))
        whole = len(content) + len(reasoning) <= LIVE_WHOLE_ROW_CHARS
        content_at, reasoning_at = (0, 0) if whole else (sent_content, sent_reasoning)
        realtime.event_send_on_commit(
            conversation_id=self._conversation_id,
            type=realtime.RUN_DELTA,
            run_id=self.run.pk,
            seq=self._seq + 1,
            agent=self._chunk_agent,
            at=[content_at, reasoning_at],
            content=content[content_at:],
            reasoning=reasoning[reasoning_at:],
        )

    def flush_chunks(self) -> None:
        if self._chunks or self._thoughts:
            content, reasoning = "".join(self._chunks), "".join(self._thoughts)
            self._chunks, self._thoughts = [], []
            self._live_at = (0, 0)
            data = {"content": content, **({"reasoning": reasoning} if reasoning else {})}
            self._write(RunEvent.Type.LLM_CHUNK, self._chunk_agent, data)

    def _write(self, type: str, agent: str, data: dict) -> RunEvent:
        seq = self._seq + 1
        event = transient_retry(lambda: self._insert(seq, type, agent, data), what=f"event {seq} of run {self.run.pk}")
        self._seq = event.seq
        self._last_write = time.monotonic()
        connection_release()
        return event

    def _insert(self, seq: int, type: str, agent: str, data: dict) -> RunEvent:
        try:
            with transaction.atomic():
                if self._lease is not None:
                    self._lease.hold()
                event = RunEvent.objects.create(run=self.run, seq=seq, type=type, agent=agent, data=data)
                self._announce_on_commit(event)
                return event
        except IntegrityError:
            # A retry of a write whose commit went through though the
            # connection broke before it said so: the row is there already.
            event = RunEvent.objects.filter(run=self.run, seq=seq, type=type).first()
            if event is None:
                raise
            self._announce_on_commit(event)
            return event

    def _announce_on_commit(self, event: RunEvent) -> None:
        realtime.event_send_on_commit(
            conversation_id=self._conversation_id, type=realtime.RUN_EVENT, run_id=self.run.pk, seq=event.seq
        )
        if self._on_event is not None:
            transaction.on_commit(lambda: self._on_event(event))

    def artifacts_changed(self) -> None:
        """Wake the conversation's open pages for something that is not an
        event row: the artifact working set changed."""
        realtime.event_send_on_commit(conversation_id=self._conversation_id, type=realtime.ARTIFACTS_CHANGED)
