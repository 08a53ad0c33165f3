import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from channels.db import DatabaseSyncToAsync
from channels.generic.websocket import AsyncWebsocketConsumer, WebsocketConsumer
from django.conf import settings

from agents.models import Run

from . import selectors
from .streaming import stream_advance, stream_open

logger = logging.getLogger(__name__)

ARTIFACTS_CHANGED_SIGNAL = '<div id="artifacts-changed" hx-swap-oob="true" hidden></div>'
# Close code after which the htmx websocket extension reconnects ("try again later").
TRY_AGAIN_LATER = 1013

# Consumers' database work runs here rather than in asgiref's one thread-sensitive
# thread, which every websocket and the channel layer of a daphne process share:
# one tab's push never queues behind another's.
_executor = ThreadPoolExecutor(max_workers=settings.WEBSOCKET_THREADS, thread_name_prefix="websocket")


def _in_thread(function):
    return DatabaseSyncToAsync(function, thread_sensitive=False, executor=_executor)


class ConversationConsumer(AsyncWebsocketConsumer):
    """Pushes a conversation's live runs to its open page as HTML fragments that
    HTMX swaps in by id: a snapshot of each running message on connect, then
    only what is new (conversations.streaming), at most one push per
    WEBSOCKET_PUSH_INTERVAL, and a last snapshot when a run ends. Wake-ups from the
    channel layer only say which run changed; what changed is read from the
    event log after the last event this connection saw, so a lost wake-up is
    healed by the next."""

    conversation = None

    async def connect(self):
        # run id -> its stream, or None once the page has the run's final state.
        self.streams = {}
        self.dirty = set()
        self.pusher = None
        self.last_push = 0.0
        user = self.scope["user"]
        if user.is_authenticated:
            self.conversation = await _in_thread(selectors.conversation_get)(
                user=user, conversation_id=self.scope["url_route"]["kwargs"]["conversation_id"]
            )
        if self.conversation is None:
            await self.close()
            return
        await self.channel_layer.group_add(self.conversation.group_name, self.channel_name)
        await self.accept()
        # The page shows everything else already; what is still running may
        # have moved on while it loaded or was disconnected.
        html = await _in_thread(self._advance_active)()
        if html:
            await self.send(text_data=html)
        await self.artifacts_changed({})

    async def disconnect(self, code):
        if self.pusher is not None:
            self.pusher.cancel()
        if self.conversation is not None:
            await self.channel_layer.group_discard(self.conversation.group_name, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        """The page names the runs it shows as running (app.js, on open): any
        that ended while it loaded or was away gets its final snapshot."""
        try:
            shown = json.loads(text_data or "")["running"]
            run_ids = {int(run_id) for run_id in shown[:100]}
        except (ValueError, TypeError, KeyError):
            return
        self.dirty.update(run_ids - self.streams.keys())
        self._push_soon()

    async def run_event(self, event):
        self.dirty.add(event["run_id"])
        self._push_soon()

    async def artifacts_changed(self, event):
        # The page re-fetches the artifact it shows (it alone knows which one).
        await self.send(text_data=ARTIFACTS_CHANGED_SIGNAL)

    def _push_soon(self):
        if self.dirty and self.pusher is None:
            self.pusher = asyncio.create_task(self._push())

    async def _push(self):
        try:
            while self.dirty:
                # The first change after a pause goes at once; changes that come
                # faster are coalesced into one push per interval.
                await asyncio.sleep(max(0.0, self.last_push + settings.WEBSOCKET_PUSH_INTERVAL - time.monotonic()))
                run_ids, self.dirty = self.dirty, set()
                self.last_push = time.monotonic()
                html = await _in_thread(self._advance)(run_ids)
                if html:
                    await self.send(text_data=html)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The page reconnects and is sent a fresh snapshot.
            logger.exception("Websocket push failed for conversation %s", self.conversation.pk)
            await self.close(code=TRY_AGAIN_LATER)
        finally:
            self.pusher = None

    def _advance_active(self) -> str:
        runs = Run.objects.filter(message__conversation=self.conversation, status__in=Run.ACTIVE_STATUSES)
        return self._advance(runs.values_list("pk", flat=True))

    def _advance(self, run_ids) -> str:
        parts = []
        for run_id in sorted(run_ids):
            if run_id not in self.streams:
                stream, html = stream_open(conversation=self.conversation, run_id=run_id)
            elif self.streams[run_id] is None:
                continue
            else:
                stream, html = stream_advance(conversation=self.conversation, stream=self.streams[run_id])
            self.streams[run_id] = stream
            parts.append(html)
        return "".join(parts)


class NotFoundConsumer(WebsocketConsumer):
    """Refuses a websocket on a path nothing serves."""

    def connect(self):
        self.close()
