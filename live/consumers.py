import asyncio
import functools
import logging
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor

from channels.consumer import get_handler_name
from channels.db import DatabaseSyncToAsync
from channels.generic.websocket import AsyncWebsocketConsumer, WebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.template.loader import render_to_string
from django.utils import translation

from accounts.services import scope_language
from agents import selectors as agent_selectors
from agents.budgets import budget_notice
from agents.models import Run
from agents.selectors import conversation_active_run
from agents.services import notices as agent_notices
from agents.titling import SOURCE_MODEL, TITLE_SOURCE
from artifactflow import descriptors, metrics, realtime
from conversations import selectors
from conversations import services as conversation_services

from . import sockets
from .streaming import stream_advance, stream_open

logger = logging.getLogger(__name__)

# Close code after which the htmx websocket extension reconnects ("try again later").
TRY_AGAIN_LATER = 1013
# Close code after which the page does not reconnect (static/js/socket.js): the
# page's session signed out. Not 1000: a clean close is what some proxies send
# when the server behind them restarts, and after that the page reconnects.
SIGNED_OUT = 4401
# Nor after this one: the conversation is no longer shared with the page's
# user. The page says so (app.js) rather than reconnecting to a refusal.
NO_LONGER_SHARED = 4403
# While the channel layer cannot be reached (Redis down), a connection polls its
# runs this often instead of waiting to be woken, and tries to join again.
LAYER_DOWN_POLL_INTERVAL = 1.0
LAYER_DOWN = "Channel layer unreachable: the websocket of conversation %s polls until it is back"

# Consumers' database work runs here rather than in asgiref's one thread-sensitive
# thread, which every websocket and the channel layer of a daphne process share:
# one tab's push never queues behind another's.
_executor = ThreadPoolExecutor(max_workers=settings.WEBSOCKET_THREADS, thread_name_prefix="websocket")


def _in_thread(function):
    return DatabaseSyncToAsync(function, thread_sensitive=False, executor=_executor)


# How often a socket's task is cancelled again until it has ended (_cancelled).
RECANCEL_INTERVAL = 1.0


def _cancelled(task: asyncio.Task | None) -> None:
    """Cancels a socket's task, and again every RECANCEL_INTERVAL until it has
    ended: a cancellation that lands while redis-py connects is lost (seen on
    Python 3.11), and channels_redis's receive then blocks on Redis, 5 s at a
    time, for ever. A socket's loops must never outlive the socket."""
    if task is not None and not task.done():
        task.cancel()
        asyncio.get_running_loop().call_later(RECANCEL_INTERVAL, _cancelled, task)


@functools.cache
def _artifacts_changed_signal() -> str:
    # The same for every page and language: rendered once per process.
    return render_to_string("live/page.html#artifacts_changed", {"oob": True})


# Pages of this process following a running turn; past this many, each is
# pushed less often (coalescing more), so a busy process keeps up.
PUSHES_AT_FULL_RATE = 16
_following: weakref.WeakSet = weakref.WeakSet()


def _push_interval() -> float:
    return settings.WEBSOCKET_PUSH_INTERVAL * max(1.0, len(_following) / PUSHES_AT_FULL_RATE)


class RunStateMixin:
    """The marks of the user's conversation list and the tab title's count,
    pushed to each of their pages over the one websocket the page holds
    (realtime.RUN_STATE on the user's group): a conversation's mark partial
    and the count, the same partials the list renders (live/run_state.html).
    A page open on a conversation whose turn ends sees it end: that is
    looking, and the conversation is marked seen. Needs `self.language` and
    `self.scope`."""

    # The conversation this page shows, if any: its ended turn is seen here.
    conversation = None

    async def run_state(self, event):
        html = await _in_thread(self._run_state_rendered)(event.get("conversation_id"))
        if html:
            await self.send(text_data=html)

    def _run_state_rendered(self, conversation_id) -> str:
        user = self.scope["user"]
        state = agent_selectors.conversation_marks(user=user)
        shown = self.conversation is not None
        ended_here = shown and state.get(self.conversation.pk) == agent_selectors.MARK_FINISHED
        if ended_here:
            # Every other page of the user then hears of it and clears the mark.
            if self.conversation.owner_id == user.pk:
                conversation_services.conversation_seen(conversation=self.conversation)
            else:
                agent_notices.notices_seen(user=user, conversation_id=self.conversation.pk)
            state.marks.pop(self.conversation.pk)
        # One conversation's mark on a wake-up, every marked one on connect.
        named = [uuid.UUID(conversation_id)] if conversation_id else list(state.marks)
        with translation.override(self.language):
            parts = [
                render_to_string(
                    "live/run_state.html#run_mark",
                    {
                        "mark_id": pk,
                        "mark": state.get(pk),
                        "mark_title": state.titles.get(pk, ""),
                        # A hidden tab showing it still notifies that it ended.
                        "ended_here": ended_here and pk == self.conversation.pk,
                        "oob": True,
                    },
                )
                for pk in named
            ]
            parts.append(
                render_to_string("live/run_state.html#attention", {"attention": state.waiting_count, "oob": True})
            )
        return "".join(parts)


class HandlersInTheLoop:
    """channels closes stale database connections before every handler, in
    asgiref's one thread-sensitive thread: the thread every page view and
    form post of the process waits for. These consumers touch the database
    only through `_in_thread`, whose threads close their own, so that hop
    did nothing but queue each open page's wake-ups in front of people's
    questions (with fifty asking at once, the last waited seconds for it)."""

    async def dispatch(self, message):
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


class TasksEndWithTheSocket:
    """The server ends a consumer that outlives its close timeout by cancelling
    it, and disconnect() may not have run: the tasks it started (`_stop`) end
    with it rather than polling for a socket that is gone, and its socket
    leaves the open websockets' count (artifactflow.metrics)."""

    # Set once the socket is accepted and counted.
    counted = False

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._stop()
            if self.counted:
                metrics.websocket_closed()


class ConversationConsumer(TasksEndWithTheSocket, HandlersInTheLoop, RunStateMixin, AsyncWebsocketConsumer):
    """Pushes a conversation's live runs to its open page as HTML fragments that
    HTMX swaps in by id: a snapshot of each running message on connect, then
    only what is new (streaming), at most one push per
    WEBSOCKET_PUSH_INTERVAL, and a last snapshot when a run ends. Wake-ups from the
    channel layer only say which run changed; what changed is read from the
    event log after the last event this connection saw, so a lost wake-up is
    healed by the next.

    The layer is best-effort like its wake-ups: while it cannot be reached the
    connection polls the event log instead (`_listen`), so a page goes on
    streaming through a Redis outage and is woken again once Redis is back.

    A connection lives as long as its session signs its user in (sockets):
    it closes when that session signs out (the user's group on the layer), and
    checks its session every WEBSOCKET_SESSION_CHECK_INTERVAL, with or without
    the layer, and at once when the user's password or account changes."""

    conversation = None
    # A page of a conversation shared with its user, not the owner's: no composer, no controls.
    read_only = False
    # None: channels would listen to the layer itself, beside the socket, and
    # end the websocket the moment the layer fails. `_listen` listens instead.
    channel_layer_alias = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.budget = sockets.MessageBudget(
            burst=settings.WEBSOCKET_MESSAGE_BURST, per_second=settings.WEBSOCKET_MESSAGES_PER_SECOND
        )
        self.ended = False
        self.pusher = self.listener = self.checker = self.healer = None

    async def dispatch(self, message):
        # A frame beyond the page's budget, or after its session ended, is
        # dropped here, unread: a page flooding its socket costs the process
        # next to nothing.
        if message["type"] == "websocket.receive" and (self.ended or not self.budget.take()):
            return
        await super().dispatch(message)

    async def connect(self):
        # Each tab holds a socket: a process running out of them refuses the
        # next without a word, so it says so while there is still room.
        descriptors.descriptors_check()
        # run id -> its stream, or None once the page has the run's final state.
        self.streams = {}
        # Runs that wrote rows since the last push, and streamed text sent live.
        self.dirty = set()
        self.deltas = {}
        # Runs the page asked to be sent whole, and those it was sent whole on connecting.
        self.resent = set()
        self.sent_on_connect = set()
        # run id -> when a wake-up last said it wrote rows (or it was read for want of one).
        self.woken = {}
        self.last_push = 0.0
        self.polled_active = None
        user = self.scope["user"]
        if user.is_authenticated:
            self.conversation = await _in_thread(selectors.conversation_viewable)(
                user=user, conversation_id=self.scope["url_route"]["kwargs"]["conversation_id"]
            )
        if self.conversation is None:
            await self.close()
            return
        self.read_only = self.conversation.owner_id != user.pk
        # Its pushes speak the language its page was rendered in.
        self.language = await _in_thread(scope_language)(scope=self.scope)
        # The key AuthMiddleware found the user by: the session this socket lives by.
        self.session_key = self.scope["session"].session_key
        self.session_tag = sockets.session_tag(self.session_key)
        # Not `groups`: channels would leave those itself, and fail where the layer is down.
        self.layer_groups = [self.conversation.group_name, realtime.user_group(user.pk)]
        self.channel_layer = get_channel_layer()
        self.channel_name = await self.channel_layer.new_channel()
        # Joined before the snapshot, so that nothing after it goes unannounced.
        joined = await self._join()
        if not joined:
            logger.warning(LAYER_DOWN, self.conversation.pk)
        await self.accept()
        metrics.websocket_opened()
        self.counted = True
        # The page shows everything else already; what is still running may
        # have moved on while it loaded or was disconnected.
        html = await _in_thread(self._advance_active)()
        self.sent_on_connect = {run_id for run_id, stream in self.streams.items() if stream is not None}
        self._following_note()
        if html:
            await self.send(text_data=html)
        if self.conversation.metadata.get(TITLE_SOURCE) == SOURCE_MODEL:
            # The model may have named it between the page's render and this
            # connection, its push then sent to no one: the head shows the title as it is.
            await self.title_changed({"title": self.conversation.title})
        await self.artifacts_changed({})
        self.listener = asyncio.create_task(self._listen(joined=joined))
        self.checker = asyncio.create_task(self._check_session())
        self.healer = asyncio.create_task(self._read_quiet_runs())

    async def disconnect(self, code):
        self._stop()
        if self.conversation is not None:
            try:
                for group in self.layer_groups:
                    await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:
                # The layer is down; the membership expires with the group.
                logger.debug("Could not leave the group of conversation %s", self.conversation.pk, exc_info=True)

    def _following_note(self):
        if any(stream is not None for stream in self.streams.values()):
            _following.add(self)
        else:
            _following.discard(self)

    def _stop(self):
        _following.discard(self)
        for task in (self.pusher, self.listener, self.checker, self.healer):
            _cancelled(task)

    async def _join(self) -> bool:
        try:
            for group in self.layer_groups:
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception:
            # Whatever the layer's backend raises when it cannot be reached;
            # the caller warns once, not at every try.
            logger.debug("Could not join the group of conversation %s", self.conversation.pk, exc_info=True)
            return False
        return True

    async def _listen(self, *, joined: bool):
        """Hands the layer's wake-ups to their handlers. While the layer cannot
        be reached, polls instead: every LAYER_DOWN_POLL_INTERVAL the runs are
        advanced as a wake-up would have them and joining is tried again. The
        poll right after joining catches up on what came before it."""
        try:
            while True:
                while joined:
                    try:
                        message = await self.channel_layer.receive(self.channel_name)
                    except Exception:
                        logger.warning(LAYER_DOWN, self.conversation.pk, exc_info=True)
                        joined = False
                    else:
                        await self.dispatch(message)
                await asyncio.sleep(LAYER_DOWN_POLL_INTERVAL)
                joined = await self._join()
                await self._poll(rejoined=joined)
        except asyncio.CancelledError:
            raise
        except Exception:
            await self._give_up("listening")

    async def _poll(self, *, rejoined: bool):
        """What wake-ups would have said: the runs still active or still
        followed are advanced by the usual push."""
        active = await _in_thread(self._active_run_ids)()
        self.dirty.update(active, (run_id for run_id, stream in self.streams.items() if stream is not None))
        self._push_soon()
        if rejoined or active != self.polled_active:
            # A turn started or ended (its artifacts saved), or the pane's own
            # wake-ups were lost: the page re-fetches the artifact it shows.
            await self.artifacts_changed({})
        self.polled_active = active

    async def _check_session(self):
        try:
            while True:
                await asyncio.sleep(settings.WEBSOCKET_SESSION_CHECK_INTERVAL)
                await self.session_changed({})
                # A revocation whose wake-up was lost (the layer down) closes a viewer's page here.
                await self.shares_changed({})
        except asyncio.CancelledError:
            raise
        except Exception:
            await self._give_up("session check")

    async def _read_quiet_runs(self):
        try:
            while True:
                await asyncio.sleep(settings.WEBSOCKET_QUIET_RUN_SECONDS)
                now = time.monotonic()
                for run_id, stream in self.streams.items():
                    if stream is not None and now - self.woken.get(run_id, 0.0) >= settings.WEBSOCKET_QUIET_RUN_SECONDS:
                        self.woken[run_id] = now
                        self.dirty.add(run_id)
                self._push_soon()
        except asyncio.CancelledError:
            raise
        except Exception:
            await self._give_up("reading quiet runs")

    async def receive(self, text_data=None, bytes_data=None):
        """The page names the runs it shows as running (app.js, on open, after
        its thread is swapped and when its question's turn is added): each of
        this conversation's is sent whole, and followed from there. One that
        ended while the page loaded, was away or showed another branch gets
        its final snapshot, again if need be. One that started while the page
        was open may have been pushed before the page held its turn (the
        question's answer still on its way) and dropped there, with the text
        that followed: the page would show it queued while its answer
        streamed. What a page would not send is ignored (sockets)."""
        named = sockets.running_named(text_data) - self.sent_on_connect
        # The snapshots sent on connecting reached a loaded page: its first
        # word, on opening, asks for none of them again.
        self.sent_on_connect = set()
        if named:
            # Only this conversation's runs enter `streams`, whatever a page names.
            self.resent.update(await _in_thread(self._runs_here)(named))
            self._push_soon()

    async def run_event(self, event):
        self.woken[event["run_id"]] = time.monotonic()
        self.dirty.add(event["run_id"])
        self._push_soon()

    async def run_delta(self, event):
        # Only a run this page follows: a piece of text opens no stream.
        if self.streams.get(event["run_id"]) is not None:
            self.deltas.setdefault(event["run_id"], []).append(event)
            self._push_soon()

    async def artifacts_changed(self, event):
        # The page re-fetches the artifact it shows (it alone knows which one).
        await self.send(text_data=_artifacts_changed_signal())

    async def title_changed(self, event):
        # The model named the conversation (agents.titling): its head shows the title.
        html = render_to_string("conversations/chat.html#conversation_title", {"title": event["title"], "oob": True})
        await self.send(text_data=html)

    async def session_ended(self, event):
        if event["session"] == self.session_tag:
            await self._end(code=SIGNED_OUT)

    async def session_changed(self, event):
        signed_in = await _in_thread(sockets.session_signs_in)(
            session_key=self.session_key, user_id=self.scope["user"].pk
        )
        if not signed_in:
            # A tab whose browser holds a session still (its own password
            # change gave it a new key) reconnects; any other is refused then.
            await self._end(code=TRY_AGAIN_LATER)

    async def shares_changed(self, event):
        """A share was revoked (or the user left a group): a viewer who may no
        longer read the conversation is closed at once. The owner always may."""
        if not self.read_only:
            return
        still = await _in_thread(selectors.conversation_viewable)(
            user=self.scope["user"], conversation_id=self.conversation.pk
        )
        if still is None:
            await self._end(code=NO_LONGER_SHARED)

    async def _end(self, *, code: int):
        self.ended = True
        await self.close(code=code)
        # Nothing more is pushed; the task that called stops at its next wait.
        self._stop()

    async def _give_up(self, what: str):
        # The page reconnects and is sent a fresh snapshot.
        logger.exception("Websocket %s failed for conversation %s", what, self.conversation.pk)
        await self.close(code=TRY_AGAIN_LATER)

    def _push_soon(self):
        if (self.dirty or self.deltas or self.resent) and self.pusher is None:
            self.pusher = asyncio.create_task(self._push())

    async def _push(self):
        try:
            while self.dirty or self.deltas or self.resent:
                # The first change after a pause goes at once; changes that come
                # faster are coalesced into one push per interval.
                await asyncio.sleep(max(0.0, self.last_push + _push_interval() - time.monotonic()))
                run_ids, self.dirty = self.dirty, set()
                deltas, self.deltas = self.deltas, {}
                resent, self.resent = self.resent, set()
                self.last_push = time.monotonic()
                html = await _in_thread(self._advance)(run_ids, deltas=deltas, resent=resent)
                self._following_note()
                if html:
                    await self.send(text_data=html)
        except asyncio.CancelledError:
            raise
        except Exception:
            await self._give_up("push")
        finally:
            self.pusher = None

    def _runs_here(self, run_ids) -> set[int]:
        runs = Run.objects.filter(pk__in=run_ids, message__conversation=self.conversation)
        return set(runs.values_list("pk", flat=True))

    def _active_run_ids(self) -> set[int]:
        runs = Run.objects.filter(message__conversation=self.conversation, status__in=Run.ACTIVE_STATUSES)
        return set(runs.values_list("pk", flat=True))

    def _advance_active(self) -> str:
        # The page's composer may predate a turn that started or ended while it loaded.
        return self._advance(self._active_run_ids(), composer=True)

    def _advance(self, run_ids, *, deltas=None, resent=frozenset(), composer: bool = False) -> str:
        """What is new in these runs (rows written in `run_ids`, text sent
        live in `deltas`), those in `resent` whole; and the composer's Send or
        Stop when a run started or ended here (or `composer` asks for it anyway)."""
        with translation.override(self.language):
            return self._advance_rendered(run_ids, deltas=deltas or {}, resent=resent, composer=composer)

    def _advance_rendered(self, run_ids, *, deltas: dict, resent, composer: bool) -> str:
        parts = []
        for run_id in sorted(set(run_ids) | deltas.keys() | resent):
            if run_id not in self.streams or run_id in resent:
                stream, html = stream_open(conversation=self.conversation, run_id=run_id, read_only=self.read_only)
                composer = True
            elif self.streams[run_id] is None:
                continue
            else:
                stream, html = stream_advance(
                    conversation=self.conversation,
                    stream=self.streams[run_id],
                    read=run_id in run_ids,
                    deltas=deltas.get(run_id, ()),
                )
                composer = composer or stream is None
            self.streams[run_id] = stream
            parts.append(html)
        if composer and not self.read_only:
            active_run = conversation_active_run(conversation_id=self.conversation.pk)
            parts.append(render_to_string("live/page.html#composer_actions", {"active_run": active_run, "oob": True}))
            # A turn that ended may have brought the person past most of today's budget.
            notice = {"budget_notice": budget_notice(user=self.scope["user"]), "oob": True}
            parts.append(render_to_string("live/page.html#budget_notice", notice))
        return "".join(parts)


class UserConsumer(TasksEndWithTheSocket, HandlersInTheLoop, RunStateMixin, AsyncWebsocketConsumer):
    """The websocket of a page that shows no conversation (a new one's): it
    carries what the user's group says, the list's marks and the end of the
    session, and nothing of any conversation's stream. A page holds one
    websocket, this or its conversation's, never both.

    Unlike ConversationConsumer it has no turn to keep streaming through a
    layer outage: channels listens to the layer, and a layer failure closes
    the socket, which the page reopens."""

    checker = None

    async def connect(self):
        descriptors.descriptors_check()
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close()
            return
        self.language = await _in_thread(scope_language)(scope=self.scope)
        self.session_key = self.scope["session"].session_key
        self.session_tag = sockets.session_tag(self.session_key)
        self.group = realtime.user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        metrics.websocket_opened()
        self.counted = True
        await self.run_state({})
        self.checker = asyncio.create_task(self._check_session())

    async def disconnect(self, code):
        self._stop()
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def dispatch(self, message):
        # A page says nothing this socket listens to (app.js names its running
        # turns to any socket it opens): its frames are dropped unread.
        if message["type"] != "websocket.receive":
            await super().dispatch(message)

    def _stop(self):
        _cancelled(self.checker)

    async def _check_session(self):
        while True:
            await asyncio.sleep(settings.WEBSOCKET_SESSION_CHECK_INTERVAL)
            await self.session_changed({})

    async def session_ended(self, event):
        if event["session"] == self.session_tag:
            await self.close(code=SIGNED_OUT)

    async def session_changed(self, event):
        signed_in = await _in_thread(sockets.session_signs_in)(
            session_key=self.session_key, user_id=self.scope["user"].pk
        )
        if not signed_in:
            await self.close(code=TRY_AGAIN_LATER)


class NotFoundConsumer(WebsocketConsumer):
    """Refuses a websocket on a path nothing serves."""

    def connect(self):
        self.close()
