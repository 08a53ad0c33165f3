"""The channel layer of Postgres + Redis setups (live.redis_layer), on a Redis
of the test's own: each layer below stands for a process (its own connections
to Redis), as daphne's and a worker's do."""

import asyncio

import pytest
import redis.asyncio

from live.layer import MAX_FRAME
from live.redis_layer import LayerDown, RedisPubSubLayer
from tests import waits

pytestmark = pytest.mark.processes

GROUP = "conversation-7"
WAIT = waits.seconds(5)


def _layer(url, **config):
    return RedisPubSubLayer(hosts=[{"address": url, "socket_timeout": 15, "socket_connect_timeout": 5}], **config)


async def _joined(layer, group=GROUP):
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    return channel


async def _commands(client) -> dict[str, int]:
    """The calls Redis has taken of each command but INFO, this function's own."""
    stats = await client.info("commandstats")
    return {name.removeprefix("cmdstat_"): stat["calls"] for name, stat in stats.items() if name != "cmdstat_info"}


async def test_a_wake_up_reaches_every_channel_of_its_group_in_another_process_and_no_other(disposable_redis):
    web, worker = _layer(disposable_redis.url), _layer(disposable_redis.url)
    first, second = await _joined(web), await _joined(web)
    elsewhere = await _joined(web, "conversation-8")

    await worker.group_send(GROUP, {"type": "run.delta", "content": "研究正在进行。"})
    for channel in (first, second):
        message = await asyncio.wait_for(web.receive(channel), WAIT)
        assert message == {"type": "run.delta", "content": "研究正在进行。"}
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(web.receive(elsewhere), waits.seconds(0.5))


async def test_a_wake_up_is_one_publish_and_a_group_costs_redis_one_subscription_a_process(disposable_redis):
    web, worker = _layer(disposable_redis.url), _layer(disposable_redis.url)
    channels = [await _joined(web) for _ in range(5)]
    await worker.group_send(GROUP, {"type": "run.event", "run_id": 1, "seq": 1})
    client = redis.asyncio.Redis.from_url(disposable_redis.url)
    try:
        before = await _commands(client)
        assert before["subscribe"] == 1
        for seq in range(2, 12):
            await worker.group_send(GROUP, {"type": "run.event", "run_id": 1, "seq": seq})
        for channel in channels:
            assert [(await asyncio.wait_for(web.receive(channel), WAIT))["seq"] for _ in range(11)] == [*range(1, 12)]
        after = await _commands(client)
    finally:
        await client.aclose()
    # Nothing stored and nothing polled: ten wake-ups to five sockets, ten commands.
    assert after == {**before, "publish": before["publish"] + 10}


async def test_the_last_channel_leaving_a_group_unsubscribes_the_process(disposable_redis):
    web, worker = _layer(disposable_redis.url), _layer(disposable_redis.url)
    channel = await _joined(web)
    client = redis.asyncio.Redis.from_url(disposable_redis.url)
    try:
        assert await client.pubsub_numsub(f"asgi:group:{GROUP}") == [(f"asgi:group:{GROUP}".encode(), 1)]
        await web.group_discard(GROUP, channel)
        assert await client.pubsub_numsub(f"asgi:group:{GROUP}") == [(f"asgi:group:{GROUP}".encode(), 0)]
    finally:
        await client.aclose()
    await worker.group_send(GROUP, {"type": "run.event"})
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(web.receive(channel), waits.seconds(0.5))


async def test_portals_with_their_own_prefix_on_one_redis_never_hear_one_another(disposable_redis):
    ours, theirs = _layer(disposable_redis.url, prefix="ours"), _layer(disposable_redis.url, prefix="theirs")
    channel = await _joined(ours, "user-107")
    await theirs.group_send("user-107", {"type": "run.state"})
    await _layer(disposable_redis.url, prefix="ours").group_send("user-107", {"type": "session.changed"})
    assert await asyncio.wait_for(ours.receive(channel), WAIT) == {"type": "session.changed"}


async def test_what_no_portal_would_publish_is_dropped_and_what_follows_arrives(disposable_redis, caplog):
    web = _layer(disposable_redis.url)
    channel = await _joined(web)
    client = redis.asyncio.Redis.from_url(disposable_redis.url)
    try:
        for data in (b"\xff not json", b"[1, 2]", b"x" * (MAX_FRAME + 1)):
            await client.publish(f"asgi:group:{GROUP}", data)
    finally:
        await client.aclose()
    await _layer(disposable_redis.url).group_send(GROUP, {"type": "run.event", "seq": 1})
    assert await asyncio.wait_for(web.receive(channel), WAIT) == {"type": "run.event", "seq": 1}
    assert "not JSON" in caplog.text and "beyond the layer's" in caplog.text


async def test_a_message_beyond_the_frame_is_not_sent(disposable_redis, caplog):
    web = _layer(disposable_redis.url)
    channel = await _joined(web)
    sender = _layer(disposable_redis.url)
    await sender.group_send(GROUP, {"type": "run.delta", "content": "字" * MAX_FRAME})
    await sender.group_send(GROUP, {"type": "run.event", "seq": 2})
    assert await asyncio.wait_for(web.receive(channel), WAIT) == {"type": "run.event", "seq": 2}
    assert "beyond the layer's" in caplog.text


async def test_while_redis_is_gone_receive_and_joining_raise_and_once_it_is_back_a_join_listens_again(
    disposable_redis,
):
    web = _layer(disposable_redis.url)
    channel = await _joined(web)
    waiting = asyncio.ensure_future(web.receive(channel))
    await asyncio.sleep(0)

    disposable_redis.kill()
    with pytest.raises(LayerDown):
        await asyncio.wait_for(waiting, WAIT)
    with pytest.raises(LayerDown):
        await web.receive(channel)
    with pytest.raises(LayerDown):
        await web.group_add("conversation-8", channel)
    # A new socket still gets its channel: its consumer polls until it can join.
    assert await web.new_channel()

    await asyncio.to_thread(disposable_redis.start)
    await web.group_add(GROUP, channel)
    # Every group with a member here is listened to again, not only the one joined.
    await _layer(disposable_redis.url).group_send("conversation-8", {"type": "run.event", "seq": 3})
    assert await asyncio.wait_for(web.receive(channel), WAIT) == {"type": "run.event", "seq": 3}


async def test_a_process_that_starts_while_redis_is_gone_joins_once_it_is_back(disposable_redis):
    disposable_redis.kill()
    web = _layer(disposable_redis.url)
    channel = await web.new_channel()
    with pytest.raises(LayerDown):
        await web.group_add(GROUP, channel)
    await asyncio.to_thread(disposable_redis.start)
    await web.group_add(GROUP, channel)
    await _layer(disposable_redis.url).group_send(GROUP, {"type": "run.event", "seq": 1})
    assert await asyncio.wait_for(web.receive(channel), WAIT) == {"type": "run.event", "seq": 1}


async def test_sockets_joining_at_once_share_one_connection_and_all_hear_their_groups(disposable_redis):
    web = _layer(disposable_redis.url)
    channels = await asyncio.gather(*(web.new_channel() for _ in range(6)))
    await asyncio.gather(*(web.group_add(f"conversation-{i}", channel) for i, channel in enumerate(channels)))
    sender = _layer(disposable_redis.url)
    for i in range(6):
        await sender.group_send(f"conversation-{i}", {"type": "run.event", "seq": i})
    for i, channel in enumerate(channels):
        assert await asyncio.wait_for(web.receive(channel), WAIT) == {"type": "run.event", "seq": i}
    client = redis.asyncio.Redis.from_url(disposable_redis.url)
    try:
        clients = await client.client_list()
    finally:
        await client.aclose()
    assert sum(1 for entry in clients if entry["cmd"] in ("subscribe", "unsubscribe")) == 1
