"""The channel layer of Postgres + Redis setups: wake-ups published with
Redis's pub/sub, nothing stored.

channels_redis' core layer keeps every message in a sorted set per channel
and every group in another: a group_send was four round trips to Redis and
each receive a Lua clean-up and a BZPOPMIN, one message at a time. With fifty
people streaming that was 42% of a worker's CPU and a fifth of daphne's.
Here a group_send is one PUBLISH. Each web process subscribes to the groups its
sockets are in and holds its channels and groups in memory (live.layer's
ProcessLayer, as the embedded default's layer does); one reader per process
hands what arrives to them.

What that gives up, the portal never relied on: a message published while no
process is subscribed is lost (wake-ups are only wake-ups: realtime), and `send`
to one channel reaches this process's channels only (the portal sends to groups).

An outage shows, as the consumer needs it to (live.consumers `_listen`): once
the reader loses Redis, `receive` and `group_add` raise until a `group_add`
subscribes again, so pages poll the database meanwhile and join again once
Redis answers.
"""

import asyncio
import contextlib
import json
import logging
import math

import redis.asyncio
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from .layer import MAX_FRAME, ProcessLayer

logger = logging.getLogger(__name__)

# The reader looks for a message this long before looking again: below the
# connection's socket_timeout, so a quiet Redis is never taken for a dead one.
READ_SECONDS = 5.0
# Put in the queue of each channel waiting when Redis goes, so that its
# `receive` raises; read once Redis is back, it is skipped.
LAYER_DOWN = "layer.down"


class LayerDown(ConnectionError):
    """Redis cannot be reached: the channel layer is down."""


class RedisPubSubLayer(ProcessLayer):
    """Configured in settings.CHANNEL_LAYERS where REDIS_URL is set.

    `hosts`: one, as channels_redis takes it ({"address": url, and redis-py's
    connection options}); `prefix` names this portal's channels in Redis, so
    that portals sharing a Redis database never hear one another."""

    def __init__(self, hosts, prefix="asgi", capacity=100, **kwargs):
        super().__init__(capacity=capacity, **kwargs)
        [host] = hosts
        host = {"address": host} if isinstance(host, str) else dict(host)
        self._address = host.pop("address")
        # One try and one retry: a wake-up that cannot go is dropped and logged
        # by its sender (realtime), not waited for.
        self._options = {**host, "retry": Retry(NoBackoff(), 1)}
        self.prefix = prefix
        self._loop = None
        self._redis = None
        self._pubsub = None
        self._reader = None
        self._down = False

    def _client(self) -> redis.asyncio.Redis:
        # A client belongs to the event loop it was made in (a test's, the publisher's, daphne's).
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._redis, self._pubsub, self._reader, self._down = loop, None, None, None, False
        if self._redis is None:
            self._redis = redis.asyncio.Redis.from_url(self._address, **self._options)
        return self._redis

    def _redis_channel(self, group: str) -> str:
        return f"{self.prefix}:group:{group}"

    async def group_send(self, group, message):
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        if len(data) > MAX_FRAME:
            logger.warning("Dropped a %s-byte message for %s: beyond the layer's %s", len(data), group, MAX_FRAME)
            return
        await self._client().publish(self._redis_channel(group), data)

    async def group_add(self, group, channel):
        new = not self.groups.get(group)
        await super().group_add(group, channel)
        self._client()
        if self._pubsub is None:
            await self._subscribe_all()
        elif new:
            await self._pubsub.subscribe(self._redis_channel(group))

    async def group_discard(self, group, channel):
        await super().group_discard(group, channel)
        self._client()
        if not self.groups.get(group) and self._pubsub is not None:
            # Left subscribed if Redis is gone: the next connection subscribes only to groups with members.
            with contextlib.suppress(RedisError, OSError):
                await self._pubsub.unsubscribe(self._redis_channel(group))

    async def receive(self, channel):
        while True:
            if self._down:
                raise LayerDown("Redis cannot be reached")
            message = await super().receive(channel)
            if message.get("type") != LAYER_DOWN:
                return message

    async def _subscribe_all(self) -> None:
        """A connection of its own that listens to every group with a member
        here, and the reader of it; raises LayerDown if Redis cannot be reached."""
        pubsub = self._client().pubsub(ignore_subscribe_messages=True)
        names = [self._redis_channel(group) for group, members in self.groups.items() if members]
        try:
            await pubsub.subscribe(*names)
        except (RedisError, OSError) as error:
            await _closed(pubsub)
            self._down = True
            raise LayerDown("Redis cannot be reached") from error
        if self._pubsub is not None:
            # Another group_add connected while this one waited: its connection is kept.
            await _closed(pubsub)
            await self._pubsub.subscribe(*names)
            return
        self._pubsub, self._down = pubsub, False
        # Held here: the loop keeps only a weak reference to a task.
        self._reader = asyncio.create_task(self._read(pubsub))

    async def _read(self, pubsub) -> None:
        try:
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=READ_SECONDS)
                if message is not None:
                    await self._deliver(message)
        except (RedisError, OSError):
            logger.warning("Lost Redis: open pages poll until it is back", exc_info=True)
        finally:
            if self._pubsub is pubsub:
                self._pubsub, self._reader, self._down = None, None, True
                self._receivers_wake()
            await _closed(pubsub)

    async def _deliver(self, message: dict) -> None:
        data = message["data"]
        if len(data) > MAX_FRAME:
            logger.warning("Dropped a %s-byte message: beyond the layer's %s", len(data), MAX_FRAME)
            return
        try:
            body = json.loads(data)
        except ValueError:
            logger.warning("Dropped a message that is not JSON from %s", message["channel"])
            return
        if isinstance(body, dict):
            await super().group_send(message["channel"].decode().removeprefix(f"{self.prefix}:group:"), body)

    def _receivers_wake(self) -> None:
        for queue in self.channels.values():
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait((math.inf, {"type": LAYER_DOWN}))


async def _closed(pubsub) -> None:
    with contextlib.suppress(RedisError, OSError):
        await pubsub.aclose()
