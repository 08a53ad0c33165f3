"""The embedded default's channel layer (live.layer), between real processes:
each listener below is a process of its own, as daphne is, and senders are
processes too, as workers are."""

import asyncio
import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from live import checks
from live import layer as live_layer
from live.layer import LocalSocketLayer
from tests import waits
from tests.processes import ROOT, LayerListener

pytestmark = pytest.mark.processes

# A worker in miniature: sends each message of argv[3] (a JSON list) to the group argv[2], then exits.
SENDER = """
import asyncio, json, sys
from live.layer import LocalSocketLayer

async def main():
    layer = LocalSocketLayer(directory=sys.argv[1])
    for message in json.loads(sys.argv[3]):
        await layer.group_send(sys.argv[2], message)

asyncio.run(main())
"""


@pytest.fixture
def directory(tmp_path):
    # Short: a socket's path must fit in 100 characters.
    path = Path(f"/tmp/layer-{os.getpid()}-{tmp_path.name[-20:]}")
    yield path
    for entry in path.glob("*"):
        entry.unlink()
    if path.exists():
        path.rmdir()


@pytest.fixture
def listeners(directory):
    started = []

    def start(group: str = "conversation-1") -> LayerListener:
        started.append(LayerListener(directory, group))
        return started[-1]

    yield start
    for listener in started:
        listener.kill()


def send_from_another_process(directory: Path, group: str, *messages: dict) -> None:
    subprocess.run(
        [sys.executable, "-c", SENDER, str(directory), group, json.dumps(messages)],
        cwd=ROOT,
        check=True,
        timeout=waits.seconds(30),
    )


async def test_a_message_sent_by_any_process_reaches_the_group_in_every_listening_process(directory, listeners):
    first, second = listeners(), listeners()
    here = LocalSocketLayer(directory=directory)
    member, outsider = await here.new_channel(), await here.new_channel()
    await here.group_add("conversation-1", member)
    await here.group_add("conversation-2", outsider)
    tokens = {"type": "run.delta", "run_id": 7, "content": "研究报告：第一节"}

    # A worker, then the worker that replaced it.
    await asyncio.to_thread(send_from_another_process, directory, "conversation-1", tokens)
    await asyncio.to_thread(send_from_another_process, directory, "conversation-1", {"type": "run.event", "seq": 2})

    assert await asyncio.to_thread(first.next) == tokens
    assert await asyncio.to_thread(second.next) == tokens
    assert await asyncio.wait_for(here.receive(member), waits.seconds(10)) == tokens
    assert await asyncio.to_thread(first.next) == {"type": "run.event", "seq": 2}
    assert await asyncio.wait_for(here.receive(member), waits.seconds(10)) == {"type": "run.event", "seq": 2}
    # The other group heard nothing before its own message.
    await here.group_send("conversation-2", {"type": "title.changed", "title": "第二"})
    assert await asyncio.wait_for(here.receive(outsider), waits.seconds(10)) == {
        "type": "title.changed",
        "title": "第二",
    }
    # Only sockets are in the directory, only their owner may use them, and nothing was written elsewhere.
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    sockets = sorted(directory.iterdir())
    assert sockets == sorted([first.path, second.path, directory / f"{os.getpid()}.sock"])
    assert all(stat.S_ISSOCK(path.stat().st_mode) and not path.stat().st_mode & 0o077 for path in sockets)


async def test_a_layer_in_another_directory_hears_nothing(tmp_path, directory, listeners):
    elsewhere = Path(f"{directory}-other")
    try:
        other = LayerListener(elsewhere)
        here = LocalSocketLayer(directory=directory)
        await here.group_send("conversation-1", {"type": "run.event", "seq": 1})
        await LocalSocketLayer(directory=elsewhere).group_send("conversation-1", {"type": "run.event", "seq": 2})

        assert await asyncio.to_thread(other.next) == {"type": "run.event", "seq": 2}
    finally:
        other.kill()
        for entry in elsewhere.glob("*"):
            entry.unlink()
        elsewhere.rmdir()


async def test_a_killed_web_process_leaves_a_socket_the_next_send_removes_and_its_successor_is_reached(
    directory, listeners
):
    killed = listeners()
    worker = LocalSocketLayer(directory=directory)
    await worker.group_send("conversation-1", {"type": "run.event", "seq": 1})
    assert await asyncio.to_thread(killed.next) == {"type": "run.event", "seq": 1}

    killed.kill()
    assert killed.path.exists()
    successor = listeners()
    # The worker's connection to the killed process is broken; it writes to the successor all the same.
    await worker.group_send("conversation-1", {"type": "run.event", "seq": 2})

    assert await asyncio.to_thread(successor.next) == {"type": "run.event", "seq": 2}
    assert not killed.path.exists()


async def test_a_stopped_web_process_holds_a_sender_once_and_the_others_get_every_message(directory, listeners, caplog):
    stopped, running = listeners(), listeners()
    worker = LocalSocketLayer(directory=directory)
    os.kill(stopped.process.pid, signal.SIGSTOP)
    try:
        # 3 MB in all: far beyond what a socket's buffers hold for a process that does not read.
        messages = [{"type": "run.delta", "seq": n, "content": "长文" * 1000} for n in range(500)]
        with caplog.at_level(logging.WARNING, logger="live.layer"):
            for message in messages:
                await worker.group_send("conversation-1", message)

        received = [await asyncio.to_thread(running.next) for _ in messages]
        assert [message["seq"] for message in received] == list(range(500))
        assert [record.getMessage() for record in caplog.records] == [
            f"The process listening on {stopped.path} did not read a message: "
            f"its messages are dropped for {live_layer.RESTING_SECONDS} s"
        ]
    finally:
        os.kill(stopped.process.pid, signal.SIGCONT)


async def test_an_oversize_message_is_dropped_by_its_sender(directory, listeners, caplog):
    listener = listeners()
    worker = LocalSocketLayer(directory=directory)

    with caplog.at_level(logging.WARNING, logger="live.layer"):
        await worker.group_send("conversation-1", {"type": "run.delta", "content": "x" * live_layer.MAX_FRAME})
    await worker.group_send("conversation-1", {"type": "run.event", "seq": 3})

    assert await asyncio.to_thread(listener.next) == {"type": "run.event", "seq": 3}
    assert "beyond the layer's" in caplog.text


@pytest.mark.parametrize(
    "frame",
    [
        (live_layer.MAX_FRAME + 1).to_bytes(4, "big") + b"{}",
        (12).to_bytes(4, "big") + b"not a frame!",
        b"\x00\x00",
    ],
    ids=["oversize", "not-json", "cut-short"],
)
async def test_a_hub_closes_a_connection_that_sends_what_is_not_a_message_and_serves_the_others(
    directory, listeners, frame
):
    listener = listeners()
    hostile = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hostile.connect(str(listener.path))
    hostile.sendall(frame)
    hostile.shutdown(socket.SHUT_WR)
    # The hub closed it: reading ends.
    hostile.settimeout(waits.seconds(10))
    assert hostile.recv(1) == b""
    hostile.close()

    await LocalSocketLayer(directory=directory).group_send("conversation-1", {"type": "run.event", "seq": 4})

    assert await asyncio.to_thread(listener.next) == {"type": "run.event", "seq": 4}


async def test_a_directory_too_long_for_a_socket_says_what_to_change(tmp_path, settings):
    too_long = tmp_path / ("d" * live_layer.MAX_PATH)
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "live.layer.LocalSocketLayer", "CONFIG": {"directory": too_long}}}

    with pytest.raises(OSError, match="set ARTIFACTFLOW_DATA_DIR to a shorter directory"):
        await LocalSocketLayer(directory=too_long).new_channel()
    [error] = checks.live_sockets_check(None)
    assert error.id == "live.E001" and "set ARTIFACTFLOW_DATA_DIR to a shorter directory" in error.msg


async def test_an_expired_message_is_never_delivered_and_its_channel_leaves_the_group(directory):
    """channels' expiry, though the layer looks for expired messages once a CLEAN_INTERVAL."""
    layer = LocalSocketLayer(directory=directory, expiry=1)
    channel = await layer.new_channel()
    await layer.group_add("conversation-1", channel)
    await layer.group_send("conversation-1", {"type": "run.event", "seq": 1})

    await asyncio.sleep(1 + live_layer.CLEAN_INTERVAL)
    await layer.group_send("conversation-1", {"type": "run.event", "seq": 2})

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=0.5)
    await layer.close()
