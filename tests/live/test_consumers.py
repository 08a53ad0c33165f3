import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time

import lxml.html
import pytest
import redis.asyncio
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group
from django.db import connections
from django.test import Client
from django.urls import path, reverse
from django.utils import timezone

from accounts.models import UserPreference
from agents import selectors as agent_selectors
from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.services.runs import run_cancel
from agents.titling import SOURCE_MODEL, TITLE_SOURCE
from artifactflow import descriptors, realtime
from artifactflow.asgi import application
from artifactflow.markdown import BlockSplitter, markdown_render
from artifactflow.rendered import answer_html
from conversations import lifecycle
from conversations.models import Conversation, Message
from live import consumers
from projects import services as project_services
from projects.models import ProjectMember
from tests import waits
from tests.answers import long_answer
from tests.asgi import conversation_socket, session_cookie
from tests.factories import (
    PASSWORD,
    ConversationFactory,
    ConversationShareFactory,
    MessageFactory,
    ProjectFactory,
    ProjectMemberFactory,
    RunFactory,
    TokenSpendFactory,
    UserFactory,
)
from tests.model_server import Text
from tests.processes import ROOT, database_url

# How long a helper waits for a push or a close, and for a Redis that came back; scaled (tests/waits.py).
PUSH_WAIT = waits.seconds(10)
REJOIN_WAIT = waits.seconds(15)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def woken_only(settings):
    """A page reads a run when a wake-up says so: the tests that count pushes
    see only theirs. The test of a lost wake-up sets the quiet read itself."""
    settings.WEBSOCKET_QUIET_RUN_SECONDS = 600


@sync_to_async
def _session_cookie(user):
    client = Client()
    client.force_login(user)
    return session_cookie(client)


@sync_to_async
def _conversation(user, content="Question?"):
    return lifecycle.conversation_start(user=user, content=content, enqueue=False)


def _execute_in_thread(run_id):
    try:
        run_execute(run_id=run_id)
    finally:
        connections.close_all()


def _communicator(conversation, cookie=b"", **handshake):
    return conversation_socket(conversation.pk, cookie=cookie, **handshake)


async def _connects(communicator):
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return connected


async def test_an_anonymous_websocket_is_refused(user):
    conversation = await _conversation(user)
    assert not await _connects(_communicator(conversation))


async def test_another_users_conversation_is_refused(user, other_user):
    conversation = await _conversation(user)
    assert not await _connects(_communicator(conversation, await _session_cookie(other_user)))


async def test_a_websocket_connecting_near_the_open_file_limit_is_logged(user, monkeypatch, caplog):
    # Any count is "near" the limit, and the last check was long ago.
    monkeypatch.setattr(descriptors, "WARN_SHARE", 0.0)
    monkeypatch.setattr(descriptors, "_next_check", 0.0)
    conversation = await _conversation(user)
    with caplog.at_level(logging.WARNING, logger="artifactflow.descriptors"):
        assert await _connects(_communicator(conversation, await _session_cookie(user)))
    assert "file descriptors are open" in caplog.text


# A conversation that does not exist: a fixed id, as every xdist worker must collect the same tests.
@pytest.mark.parametrize(
    "path",
    [
        "/ws/nothing/",
        "/ws/conversations/not-a-uuid/",
        "/ws/conversations/5f1c2a9e-3b7d-4e60-9a41-0d8c6b2e7f13/",
        "/",
        "/admin/",
    ],
)
async def test_a_websocket_nothing_serves_is_refused_cleanly(user, path):
    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost"), (b"cookie", await _session_cookie(user))]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    # A server error would raise here instead of answering.
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    assert not connected


async def test_a_foreign_origin_is_refused(user):
    conversation = await _conversation(user)
    communicator = _communicator(conversation, await _session_cookie(user), origin=b"https://evil.example")
    assert not await _connects(communicator)


async def test_only_the_sites_own_origin_scheme_host_and_port_opens_a_websocket(user):
    conversation = await _conversation(user)
    cookie = await _session_cookie(user)
    # The site at http://localhost:8000; the pages of the probe on other ports
    # and schemes of the same host, each with the user's cookie.
    opened = {}
    for origin in [
        "http://localhost:8000",
        "http://localhost:8001",
        "http://localhost",
        "https://localhost:8000",
        "http://127.0.0.1:8000",
        "http://localhost:8000/",
        "http://user@localhost:8000",
        "null",
    ]:
        communicator = _communicator(conversation, cookie, origin=origin.encode(), host=b"localhost:8000")
        opened[origin] = await _connects(communicator)
    assert opened == {origin: origin == "http://localhost:8000" for origin in opened}


async def test_a_websocket_needs_one_origin_and_one_allowed_host(user):
    conversation = await _conversation(user)
    cookie = await _session_cookie(user)
    path = f"/ws/conversations/{conversation.pk}/"
    for headers in [
        [(b"host", b"localhost:8000")],
        [(b"host", b"localhost:8000"), (b"origin", b"http://localhost:8000"), (b"origin", b"http://localhost:8001")],
        [(b"origin", b"http://localhost:8000")],
        # A name not in ALLOWED_HOSTS (DNS rebinding), on both sides.
        [(b"host", b"rebound.example:8000"), (b"origin", b"http://rebound.example:8000")],
    ]:
        communicator = WebsocketCommunicator(application, path, headers=[*headers, (b"cookie", cookie)])
        assert not await _connects(communicator), headers


async def test_behind_a_proxy_the_websocket_opens_from_csrf_trusted_origins_alone(user, settings):
    settings.ALLOWED_HOSTS = ["portal.example.com", "localhost"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://portal.example.com"]
    conversation = await _conversation(user)
    cookie = await _session_cookie(user)
    opened = {}
    # TLS ends at the proxy: daphne sees ws:// with the public Host.
    for origin, host in [
        ("https://portal.example.com", "portal.example.com"),
        ("https://portal.example.com:443", "portal.example.com"),
        ("http://portal.example.com", "portal.example.com"),
        ("https://portal.example.com:8443", "portal.example.com"),
        ("https://evil.portal.example.com", "portal.example.com"),
        # The handshake's own origin counts for nothing once origins are named.
        ("http://localhost", "localhost"),
    ]:
        communicator = _communicator(conversation, cookie, origin=origin.encode(), host=host.encode())
        opened[origin] = await _connects(communicator)
    assert opened == {
        "https://portal.example.com": True,
        "https://portal.example.com:443": True,
        "http://portal.example.com": False,
        "https://portal.example.com:8443": False,
        "https://evil.portal.example.com": False,
        "http://localhost": False,
    }


class Page:
    """The part of a page a conversation's websocket updates, with the
    out-of-band swaps the htmx websocket extension performs (a morph ends as
    the markup it was given, as a replacement does)."""

    def __init__(self):
        self.root = lxml.html.fragment_fromstring("<main></main>")

    def apply(self, html: str) -> None:
        for fragment in lxml.html.fragments_fromstring(html):
            if isinstance(fragment, str):
                continue
            swap = fragment.attrib.pop("hx-swap-oob")
            found = self.root.get_element_by_id(fragment.get("id"), None)
            if found is None:
                assert swap in ("true", "morph"), f"{swap} into a missing #{fragment.get('id')}"
                self.root.append(fragment)
            elif swap in ("true", "morph"):
                found.getparent().replace(found, fragment)
            elif swap == "innerHTML":
                for child in list(found):
                    found.remove(child)
                found.text = fragment.text
                found.extend(list(fragment))
            else:
                assert swap == "beforeend", swap
                children = list(found)
                if children:
                    children[-1].tail = (children[-1].tail or "") + (fragment.text or "")
                else:
                    found.text = (found.text or "") + (fragment.text or "")
                found.extend(list(fragment))

    def find(self, element_id: str):
        return self.root.get_element_by_id(element_id, None)


def _words(text: str) -> str:
    return " ".join(text.split())


def _text_of(html: str) -> str:
    return _words(lxml.html.fragment_fromstring(html, create_parent="div").text_content()) if html else ""


async def _received(communicator, *, until, timeout=PUSH_WAIT) -> list[str]:
    messages = []
    while not messages or not until(messages[-1]):
        messages.append(await communicator.receive_from(timeout=timeout))
    return messages


async def _connected(conversation, user):
    communicator = _communicator(conversation, await _session_cookie(user))
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@sync_to_async
def _finished_conversation(user):
    conversation = ConversationFactory(owner=user)
    message = MessageFactory(conversation=conversation, content="Done already?", response="It **is** done.")
    run = RunFactory(message=message, status=Run.Status.COMPLETED)
    conversation.active_branch = message
    conversation.save()
    return conversation, message, run


async def test_connect_sends_what_is_still_running_not_the_thread(user):
    conversation, done_message, _ = await _finished_conversation(user)
    queued = await sync_to_async(lifecycle.message_post)(
        conversation=conversation, content="Still waiting?", enqueue=False
    )
    communicator = await _connected(conversation, user)
    messages = await _received(communicator, until=lambda html: "artifacts-changed" in html)
    await communicator.disconnect()
    assert any(f'id="message-{queued.pk}"' in html and 'data-status="queued"' in html for html in messages)
    assert not any(f"message-{done_message.pk}" in html or 'id="thread"' in html for html in messages)


async def test_a_run_the_page_shows_as_running_but_that_ended_is_sent_in_its_final_form(user):
    conversation, message, run = await _finished_conversation(user)
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    await communicator.send_to(text_data=json.dumps({"running": [run.pk]}))
    html = await communicator.receive_from(timeout=waits.seconds(5))
    await communicator.disconnect()
    assert f'id="message-{message.pk}"' in html and 'data-status="completed"' in html
    assert "It <strong>is</strong> done." in html


async def test_runs_of_another_conversation_named_by_a_page_are_ignored(user, other_user):
    conversation = await _conversation(user)
    _, _, foreign_run = await _finished_conversation(other_user)
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    await communicator.send_to(text_data=json.dumps({"running": [foreign_run.pk]}))
    await communicator.send_to(text_data=json.dumps({"running": [foreign_run.pk, "x", None]}))
    await communicator.send_to(text_data="not json")
    received = []
    while not await communicator.receive_nothing(timeout=waits.seconds(0.5)):
        received.append(await communicator.receive_from())
    await communicator.disconnect()
    # Not even the composer: nothing this page has changed.
    assert received == []


async def test_a_long_answer_streams_as_appended_text_and_ends_rendered_whole(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.02
    answer = long_answer(tokens=1500)
    scripted_model.add(Text(answer, chunk_size=40, delay=0.01))
    conversation = await _conversation(user)
    message = conversation.active_branch
    communicator = await _connected(conversation, user)
    page = Page()
    for html in await _received(communicator, until=lambda html: "artifacts-changed" in html):
        page.apply(html) if "artifacts-changed" not in html else None
    run = await sync_to_async(message.runs.get)()
    worker = asyncio.create_task(asyncio.to_thread(_execute_in_thread, run.pk))

    # After every push the page shows the answer so far: finished blocks as
    # HTML, then the block being written as text, nothing lost or repeated.
    boundaries, splitter = {0: ""}, BlockSplitter()
    for end in range(1, len(answer) + 1):
        if answer[end - 1] == "\n" and splitter.advance(answer[:end]) == end:
            boundaries[end] = _text_of(markdown_render(answer[:end]))
    pushes, checked = [], 0
    while 'data-status="completed"' not in (pushes[-1] if pushes else ""):
        html = await communicator.receive_from(timeout=waits.seconds(10))
        pushes.append(html)
        if "artifacts-changed" in html:
            continue
        page.apply(html)
        blocks, tail = page.find(f"blocks-{message.pk}"), page.find(f"tail-{message.pk}")
        if blocks is None or not (tail.text or len(blocks)):
            continue
        shown_blocks = _words(blocks.text_content())
        starts = [end for end, text in boundaries.items() if text == shown_blocks]
        assert starts, "the rendered blocks are not a prefix of the answer"
        assert any(answer[start:].startswith(tail.text or "") for start in starts)
        checked += 1
    await worker
    await communicator.disconnect()

    stored = await sync_to_async(lambda: answer_html(type(message).objects.get(pk=message.pk).response))()
    final = page.find(f"message-{message.pk}")
    assert (
        final.find_class("answer")[0].text_content().strip()
        == lxml.html.fragment_fromstring(stored, create_parent="div").text_content().strip()
    )
    assert checked > 10
    snapshots = [html for html in pushes if f'<article id="message-{message.pk}"' in html]
    assert len(snapshots) <= 4, "whole-message snapshots only when the frame changes and at the end"
    assert sum(len(html.encode()) for html in pushes) <= 4 * len(stored.encode())


async def test_streamed_text_reaches_the_page_before_its_row_is_written(user, scripted_model, settings):
    # No llm_chunk row in the whole answer's time: what the page shows came
    # over the channel layer alone, and the row written at the end adds no
    # word twice.
    settings.RUN_CHUNK_FLUSH_SECONDS = 600
    settings.RUN_LIVE_SECONDS = 0.02
    answer = "Readers run beside one writer in WAL mode, 读者与写者并行。 " * 16
    scripted_model.add(Text(answer, chunk_size=6, delay=0.04))
    conversation = await _conversation(user)
    message = conversation.active_branch
    communicator = await _connected(conversation, user)
    page = await _page_of(communicator)
    run = await sync_to_async(message.runs.get)()
    worker = asyncio.create_task(asyncio.to_thread(_execute_in_thread, run.pk))

    rows = sync_to_async(lambda: run.events.filter(type=RunEvent.Type.LLM_CHUNK).count())
    shown_early = ""
    while len(shown_early) < 40:
        page.apply(await communicator.receive_from(timeout=waits.seconds(10)))
        if await rows():
            break
        answer_now = page.find(f"answer-{message.pk}")
        shown_early = _words(answer_now.text_content()) if answer_now is not None else ""
    assert len(shown_early) >= 40
    assert answer.startswith(shown_early)
    for html in await _received(communicator, until=lambda html: 'data-status="completed"' in html):
        page.apply(html)
    await worker
    await communicator.disconnect()
    assert _words(page.find(f"message-{message.pk}").find_class("answer")[0].text_content()) == _words(answer)
    assert await rows() == 1


def _answer_words(page, message) -> str:
    answer = page.find(f"answer-{message.pk}")
    return _words(answer.text_content()) if answer is not None else ""


async def test_a_page_opened_after_the_answer_began_shows_it_from_its_start_before_its_row_is_written(
    user, scripted_model, settings
):
    # A page opened as its question's answer streams (as one is, right after
    # the question is posted) joins a row of text already under way. Its row
    # is written only at the answer's end here: the page shows the start from
    # the next piece sent live, which carries the row so far.
    settings.RUN_CHUNK_FLUSH_SECONDS = 600
    settings.RUN_LIVE_SECONDS = 0.02
    first, rest = "预写式日志让读者与写者并行。 " * 4, "Readers run beside one writer. " * 4
    scripted_model.add(Text(first + rest, chunk_size=6, delay=0.02, hold=rest))
    conversation = await _conversation(user)
    message = conversation.active_branch
    run = await sync_to_async(message.runs.get)()
    early = await _connected(conversation, user)
    early_page = await _page_of(early)
    worker = asyncio.create_task(asyncio.to_thread(_execute_in_thread, run.pk))
    # The first page shows text: pieces of the row went before the second opens.
    while not _answer_words(early_page, message):
        early_page.apply(await early.receive_from(timeout=PUSH_WAIT))
    late = await _connected(conversation, user)
    late_page = await _page_of(late)
    assert _answer_words(late_page, message) == ""
    scripted_model.release()

    rows = sync_to_async(lambda: run.events.filter(type=RunEvent.Type.LLM_CHUNK).count())
    while not _answer_words(late_page, message).startswith(_words(first)):
        html = await late.receive_from(timeout=PUSH_WAIT)
        assert 'data-status="completed"' not in html, "the page showed the answer's start only once it had ended"
        late_page.apply(html)
    assert await rows() == 0
    for html in await _received(late, until=lambda html: 'data-status="completed"' in html):
        late_page.apply(html)
    await worker
    for communicator in (early, late):
        await communicator.disconnect()
    answer = late_page.find(f"message-{message.pk}").find_class("answer")[0]
    assert _words(answer.text_content()) == _words(first + rest)


async def _watching_a_run(user):
    """A page connected to a conversation whose run's events the test writes by hand."""
    conversation = await _conversation(user)
    message = conversation.active_branch
    run = await sync_to_async(message.runs.get)()
    communicator = await _connected(conversation, user)
    page = Page()
    for html in await _received(communicator, until=lambda html: "artifacts-changed" in html):
        page.apply(html) if "artifacts-changed" not in html else None
    return conversation, message, run, communicator, page


def _announcer(conversation, run, communicator, page):
    """Announces the run's event `seq` as a worker would; the page takes in the push it brings."""

    async def push(seq):
        await get_channel_layer().group_send(
            conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": seq}
        )
        html = await communicator.receive_from(timeout=waits.seconds(5))
        page.apply(html)
        return html

    return push


def _event_writer(run):
    @sync_to_async
    def write(seq, type, **data):
        RunEvent.objects.create(run=run, seq=seq, type=type, agent="lead_agent", data=data)
        Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)

    return write


@pytest.mark.events_by_hand
async def test_a_run_whose_end_woke_no_one_is_read_once_it_is_quiet(user, settings):
    settings.WEBSOCKET_QUIET_RUN_SECONDS = 0.5
    _, message, run, communicator, page = await _watching_a_run(user)
    write = _event_writer(run)

    await write(1, RunEvent.Type.METADATA, model="m")
    await write(2, RunEvent.Type.AGENT_START)
    await write(3, RunEvent.Type.LLM_CHUNK, content="The whole answer.")
    await write(4, RunEvent.Type.COMPLETE, response="The whole answer.")
    await sync_to_async(_completed)(run, "The whole answer.")
    # Not one of these was announced.
    pushes = await _received(communicator, until=lambda html: 'data-status="completed"' in html)
    for html in pushes:
        page.apply(html)
    await communicator.disconnect()
    answer = page.find(f"message-{message.pk}").find_class("answer")[0]
    assert _words(answer.text_content()) == "The whole answer."


def _completed(run, response):
    Message.objects.filter(pk=run.message_id).update(response=response)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)


@pytest.mark.events_by_hand
async def test_lost_wake_ups_are_healed_by_the_next(user):
    conversation, message, run, communicator, page = await _watching_a_run(user)
    write = _event_writer(run)

    # Events land in the log but only the last is announced.
    await write(1, RunEvent.Type.METADATA, model="m")
    await write(2, RunEvent.Type.AGENT_START)
    await write(3, RunEvent.Type.LLM_CHUNK, content="First paragraph.\n\nSecond ")
    await write(4, RunEvent.Type.LLM_CHUNK, content="one, still going")
    await get_channel_layer().group_send(
        conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": 4}
    )
    html = await communicator.receive_from(timeout=waits.seconds(5))
    page.apply(html)
    await write(5, RunEvent.Type.LLM_CHUNK, content=" and on.")
    await get_channel_layer().group_send(
        conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": 5}
    )
    tail_push = await communicator.receive_from(timeout=waits.seconds(5))
    page.apply(tail_push)
    await communicator.disconnect()
    assert _words(page.find(f"blocks-{message.pk}").text_content()) == "First paragraph."
    assert page.find(f"tail-{message.pk}").text == "Second one, still going and on."
    assert "First paragraph" not in tail_push and len(tail_push) < 200


@pytest.mark.events_by_hand
async def test_the_composer_offers_stop_while_a_turn_runs_and_send_once_it_has_ended(user):
    conversation, _, run, communicator, page = await _watching_a_run(user)
    write, push = _event_writer(run), _announcer(conversation, run, communicator, page)

    # The snapshot on connect brings the composer as it is now: Stop for this turn.
    actions = page.find("composer-actions")
    assert actions.get("data-busy") is not None and actions.find("button").text == "Stop"
    await write(1, RunEvent.Type.METADATA, model="m")
    await write(2, RunEvent.Type.LLM_CHUNK, content="Working on it.")
    assert "composer-actions" not in await push(2)
    await write(3, RunEvent.Type.COMPLETE, response="Done.")
    await sync_to_async(Run.objects.filter(pk=run.pk).update)(status=Run.Status.COMPLETED)
    await push(3)
    await communicator.disconnect()
    actions = page.find("composer-actions")
    assert actions.get("data-busy") is None and actions.find("button").text == "Send"


@pytest.mark.events_by_hand
async def test_a_turn_that_ends_past_most_of_todays_budget_says_so_under_the_composer(user, settings):
    settings.DAILY_TOKEN_BUDGET = 10_000
    conversation, _, run, communicator, page = await _watching_a_run(user)
    write, push = _event_writer(run), _announcer(conversation, run, communicator, page)
    assert page.find("budget-notice").get("hidden") is not None

    # What the turn's calls spent, as they settle before its end.
    await sync_to_async(TokenSpendFactory)(user=user, tokens=9_100)
    await write(1, RunEvent.Type.COMPLETE, response="Done.")
    await sync_to_async(Run.objects.filter(pk=run.pk).update)(status=Run.Status.COMPLETED)
    await push(1)
    await communicator.disconnect()

    note = page.find("budget-notice")
    assert note.get("hidden") is None
    assert "You have used 91% of today's token budget: 9,100 of 10,000 tokens." in note.text_content()


@pytest.mark.events_by_hand
async def test_a_turn_resumed_after_its_worker_died_replaces_the_text_it_had_shown(user):
    conversation, message, run, communicator, page = await _watching_a_run(user)
    write, push = _event_writer(run), _announcer(conversation, run, communicator, page)

    await write(1, RunEvent.Type.METADATA, model="m")
    await write(2, RunEvent.Type.AGENT_START)
    await write(3, RunEvent.Type.LLM_CHUNK, content="Half an answer from the first worker.\n\nAnd ")
    await push(3)
    # The worker died; the next one starts the step again from the beginning.
    await write(4, RunEvent.Type.METADATA, model="m", resumed=True)
    await write(5, RunEvent.Type.LLM_CHUNK, content="A fresh start.")
    await push(5)
    await communicator.disconnect()
    answer = page.find(f"answer-{message.pk}")
    assert _words(answer.text_content()) == "A fresh start."


async def test_an_idle_websocket_outlives_the_layer_read_timeout_and_receives_a_turn(user, scripted_model, settings):
    # channels_redis blocks 5 s reading; redis-py 8 timed such reads out at 5 s
    # and closed every idle websocket (channels_redis#422). Other layers have no such
    # read to outlive: a short spell is enough there.
    idle = 12 if settings.CHANNEL_LAYERS["default"]["BACKEND"].startswith("channels_redis.") else 1
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.0
    scripted_model.add(Text("Still here after the idle spell.", chunk_size=6))
    conversation = await _conversation(user)
    message = conversation.active_branch
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    assert await communicator.receive_nothing(timeout=idle)
    run = await sync_to_async(message.runs.get)()
    await asyncio.to_thread(_execute_in_thread, run.pk)
    pushes = await _received(communicator, until=lambda html: 'data-status="completed"' in html)
    await communicator.disconnect()
    assert "Still here after the idle spell." in pushes[-1]


async def _page_of(communicator) -> Page:
    page = Page()
    for html in await _received(communicator, until=lambda html: "artifacts-changed" in html):
        page.apply(html) if "artifacts-changed" not in html else None
    return page


async def _shows(communicator, page, element_id, text, *, timeout=REJOIN_WAIT):
    """Apply pushes until the page's `element_id` reads `text`."""
    async with asyncio.timeout(timeout):
        while (page.find(element_id) is None) or _words(page.find(element_id).text_content()) != text:
            page.apply(await communicator.receive_from(timeout=timeout))


@sync_to_async
def _write(run, seq, type, **data):
    """An event as a worker writes it, but announced to no one."""
    RunEvent.objects.create(run=run, seq=seq, type=type, agent="lead_agent", data=data)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)


async def _joined(disposable_redis, conversation, *, timeout=REJOIN_WAIT):
    """Wait until the websocket is in its conversation's group again (a Redis
    that comes back after a crash has forgotten every group)."""
    # channels_redis keeps a group as the sorted set "<prefix>:group:<name>".
    client = redis.asyncio.Redis.from_url(disposable_redis.url)
    try:
        async with asyncio.timeout(timeout):
            while not await client.zcard(f"asgi:group:{conversation.group_name}"):
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()


async def _woken_after_joining(disposable_redis, communicator, page, conversation, message, run, seq, monkeypatch):
    """Once joined, wake-ups alone move the page: no more polling."""
    await _joined(disposable_redis, conversation)
    monkeypatch.setattr(consumers, "LAYER_DOWN_POLL_INTERVAL", 60)
    # The catch-up poll right after joining says what it has to say first.
    while not await communicator.receive_nothing(timeout=waits.seconds(0.5)):
        page.apply(await communicator.receive_from())
    await _write(run, seq, RunEvent.Type.LLM_CHUNK, content=" Woken again.")
    await get_channel_layer().group_send(
        conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": seq}
    )
    await _shows(communicator, page, f"tail-{message.pk}", "Polled. Woken again.", timeout=waits.seconds(5))


@pytest.mark.events_by_hand
async def test_a_websocket_opened_while_redis_is_down_polls_its_turn_and_joins_once_redis_is_back(
    user, disposable_redis, monkeypatch
):
    monkeypatch.setattr(consumers, "LAYER_DOWN_POLL_INTERVAL", 0.1)
    conversation = await _conversation(user)
    message = conversation.active_branch
    run = await sync_to_async(message.runs.get)()
    disposable_redis.kill()

    communicator = await _connected(conversation, user)
    page = await _page_of(communicator)
    await _write(run, 1, RunEvent.Type.METADATA, model="m")
    await _write(run, 2, RunEvent.Type.LLM_CHUNK, content="Polled.")
    await _shows(communicator, page, f"tail-{message.pk}", "Polled.")

    await asyncio.to_thread(disposable_redis.start)
    await _woken_after_joining(disposable_redis, communicator, page, conversation, message, run, 3, monkeypatch)
    await communicator.disconnect()


@pytest.mark.events_by_hand
async def test_a_websocket_polls_while_redis_is_dead_and_is_woken_again_once_it_is_back(
    user, disposable_redis, monkeypatch
):
    monkeypatch.setattr(consumers, "LAYER_DOWN_POLL_INTERVAL", 0.1)
    conversation = await _conversation(user)
    message = conversation.active_branch
    run = await sync_to_async(message.runs.get)()
    communicator = await _connected(conversation, user)
    page = await _page_of(communicator)
    await _write(run, 1, RunEvent.Type.METADATA, model="m")

    disposable_redis.kill()
    await _write(run, 2, RunEvent.Type.LLM_CHUNK, content="Polled.")
    await _shows(communicator, page, f"tail-{message.pk}", "Polled.")

    await asyncio.to_thread(disposable_redis.start)
    await _woken_after_joining(disposable_redis, communicator, page, conversation, message, run, 3, monkeypatch)
    await communicator.disconnect()


# --- A websocket lives as long as its session ---------------------------------------


@sync_to_async
def _browser(user):
    """A browser signed in as `user`: its client and the cookie its websockets send."""
    client = Client()
    client.force_login(user)
    return client, session_cookie(client)


async def _open(conversation, cookie):
    communicator = _communicator(conversation, cookie)
    connected, _ = await communicator.connect()
    assert connected
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    return communicator


async def _closed(communicator, *, timeout=PUSH_WAIT) -> int:
    """Wait for the server to close the websocket; its close code."""
    async with asyncio.timeout(timeout):
        while (output := await communicator.receive_output(timeout=timeout))["type"] != "websocket.close":
            pass
    return output.get("code", 1000)


async def _still_open(communicator, user):
    """The socket is open: a push to the user's group reaches it, after whatever
    the group was sent before (a busy machine may deliver those late)."""
    await get_channel_layer().group_send(realtime.user_group(user.pk), {"type": realtime.ARTIFACTS_CHANGED})
    await _received(communicator, until=lambda html: "artifacts-changed" in html, timeout=waits.seconds(5))


async def test_signing_out_closes_the_websockets_of_that_session_and_no_other(user):
    conversation = await _conversation(user)
    (browser, cookie), (_, other_cookie) = await _browser(user), await _browser(user)
    tabs = [await _open(conversation, cookie), await _open(conversation, cookie)]
    elsewhere = await _open(conversation, other_cookie)

    response = await sync_to_async(browser.post)(reverse("logout"))
    assert response.status_code == 302
    # Closed for good: the page does not reconnect after SIGNED_OUT (static/js/socket.js).
    assert [await _closed(tab) for tab in tabs] == [consumers.SIGNED_OUT, consumers.SIGNED_OUT]
    await _still_open(elsewhere, user)
    await elsewhere.disconnect()


@sync_to_async
def _password_changed_elsewhere(user):
    # As a script or another process would: no signal tells anyone.
    type(user).objects.filter(pk=user.pk).update(password=make_password("changed-elsewhere"))


async def test_a_websocket_closes_at_its_next_session_check_once_the_password_changed_elsewhere(user, settings):
    settings.WEBSOCKET_SESSION_CHECK_INTERVAL = 0.1
    conversation = await _conversation(user)
    _, cookie = await _browser(user)
    communicator = await _open(conversation, cookie)
    await _password_changed_elsewhere(user)
    # Try again later: a page whose browser is still signed in reconnects.
    assert await _closed(communicator) == consumers.TRY_AGAIN_LATER


async def test_changing_the_password_closes_the_other_browsers_websockets_at_once(user):
    conversation = await _conversation(user)
    (browser, cookie), (_, other_cookie) = await _browser(user), await _browser(user)
    here, elsewhere = await _open(conversation, cookie), await _open(conversation, other_cookie)
    response = await sync_to_async(browser.post)(
        reverse("settings"),
        {
            "form": "password",
            "old_password": PASSWORD,
            "new_password1": "a-new-pw-3141",
            "new_password2": "a-new-pw-3141",
        },
    )
    assert response.status_code == 302
    # Long before WEBSOCKET_SESSION_CHECK_INTERVAL (a minute).
    assert await _closed(elsewhere, timeout=waits.seconds(5)) == consumers.TRY_AGAIN_LATER
    # The browser that changed it was given a new session key: its tab's
    # websocket closes too, and opens again with the new key.
    assert await _closed(here, timeout=waits.seconds(5)) == consumers.TRY_AGAIN_LATER
    assert session_cookie(browser) != cookie
    reopened = await _open(conversation, session_cookie(browser))
    await reopened.disconnect()


async def test_deactivating_a_person_closes_their_websockets_at_once(user):
    conversation = await _conversation(user)
    _, cookie = await _browser(user)
    communicator = await _open(conversation, cookie)

    user.is_active = False
    await sync_to_async(user.save)()

    # Long before WEBSOCKET_SESSION_CHECK_INTERVAL (a minute); and the page, reconnecting, is refused.
    assert await _closed(communicator, timeout=waits.seconds(5)) == consumers.TRY_AGAIN_LATER
    refused = _communicator(conversation, cookie)
    connected, _ = await refused.connect()
    await refused.disconnect()
    assert not connected


@pytest.mark.events_by_hand
async def test_the_session_check_closes_a_websocket_while_redis_is_down(user, settings, disposable_redis, monkeypatch):
    monkeypatch.setattr(consumers, "LAYER_DOWN_POLL_INTERVAL", 0.1)
    settings.WEBSOCKET_SESSION_CHECK_INTERVAL = 0.1
    conversation = await _conversation(user)
    _, cookie = await _browser(user)
    disposable_redis.kill()
    communicator = await _open(conversation, cookie)
    await _password_changed_elsewhere(user)
    assert await _closed(communicator) == consumers.TRY_AGAIN_LATER


# --- What a page sends its websocket --------------------------------------------------


@sync_to_async
def _finished_turns(user, count):
    """A conversation of `count` finished turns: its messages and their runs, oldest first."""
    conversation = ConversationFactory(owner=user)
    parent, messages, runs = None, [], []
    for i in range(count):
        parent = MessageFactory(conversation=conversation, parent=parent, content=f"Turn {i}?", response=f"Answer {i}.")
        messages.append(parent)
        runs.append(RunFactory(message=parent, status=Run.Status.COMPLETED))
    return conversation, messages, runs


async def _snapshots(communicator, *, quiet=0.5) -> set[int]:
    """The ids of the messages pushed whole: the first push, however long a busy
    machine takes to send it, then every push until the socket has been quiet a while."""
    pushed = [await communicator.receive_from(timeout=waits.seconds(10))]
    while not await communicator.receive_nothing(timeout=waits.seconds(quiet)):
        pushed.append(await communicator.receive_from())
    return {int(pk) for html in pushed for pk in re.findall(r'<article id="message-(\d+)"', html)}


async def test_a_page_names_at_most_twenty_runs_a_message(user):
    conversation, messages, runs = await _finished_turns(user, 25)
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    await communicator.send_to(text_data=json.dumps({"running": [run.pk for run in runs]}))
    shown = await _snapshots(communicator)
    await communicator.disconnect()
    assert shown == {message.pk for message in messages[:20]}


async def test_a_page_that_still_shows_an_ended_run_running_is_sent_its_end_again(user):
    """As after a branch switch rendered just before the turn ended: the end was
    pushed while the page showed another branch, and had nowhere to land."""
    conversation, messages, runs = await _finished_turns(user, 1)
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    for _ in range(2):
        await communicator.send_to(text_data=json.dumps({"running": [runs[0].pk]}))
        assert await _snapshots(communicator) == {messages[0].pk}
    await communicator.disconnect()


@pytest.mark.events_by_hand
async def test_a_turn_pushed_before_the_page_held_it_is_sent_whole_once_the_page_names_it(user):
    """The worker started the turn while the answer to the question (its turn,
    queued) was still on its way to the page: the push had nowhere to land
    (socket.js drops it), nor had the text after it. Once the page names the
    turn it is sent whole, running and with everything streamed so far."""
    conversation, _, _ = await _finished_conversation(user)
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    message = await sync_to_async(lifecycle.message_post)(conversation=conversation, content="And now?", enqueue=False)
    run = await sync_to_async(message.runs.get)()
    write = _event_writer(run)
    await write(1, RunEvent.Type.METADATA, model="m")
    await write(2, RunEvent.Type.LLM_CHUNK, content="Streaming already, ")
    layer = get_channel_layer()
    await layer.group_send(conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": 2})
    await _received(communicator, until=lambda html: f'id="message-{message.pk}"' in html)
    await write(3, RunEvent.Type.LLM_CHUNK, content="and on.")
    await layer.group_send(conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": 3})
    assert f'id="message-{message.pk}"' not in await communicator.receive_from(timeout=PUSH_WAIT)

    await communicator.send_to(text_data=json.dumps({"running": [run.pk]}))
    whole = (await _received(communicator, until=lambda html: f'id="message-{message.pk}"' in html))[-1]
    await communicator.disconnect()
    turn = lxml.html.fragment_fromstring(whole, create_parent="div").get_element_by_id(f"message-{message.pk}")
    assert turn.get("data-status") == "running"
    assert _words(turn.find_class("answer")[0].text_content()) == "Streaming already, and on."


@pytest.mark.events_by_hand
async def test_a_page_opening_on_a_running_turn_is_sent_it_once_then_whole_whenever_it_names_it(user):
    """The snapshot on connecting reached a loaded page: its first word, which
    names the turn, brings no second copy; a later one (its thread swapped) does."""
    _, message, run, communicator, _ = await _watching_a_run(user)
    await communicator.send_to(text_data=json.dumps({"running": [run.pk]}))
    assert await communicator.receive_nothing(timeout=waits.seconds(1))
    await communicator.send_to(text_data=json.dumps({"running": [run.pk]}))
    assert f'<article id="message-{message.pk}"' in await communicator.receive_from(timeout=PUSH_WAIT)
    await communicator.disconnect()


async def test_messages_faster_than_a_page_sends_them_are_dropped(user, settings):
    settings.WEBSOCKET_MESSAGE_BURST, settings.WEBSOCKET_MESSAGES_PER_SECOND = 3, 1.0
    conversation, messages, runs = await _finished_turns(user, 12)
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    began = time.monotonic()
    for run in runs:
        await communicator.send_to(text_data=json.dumps({"running": [run.pk]}))
    shown = await _snapshots(communicator)
    elapsed = time.monotonic() - began
    await communicator.disconnect()
    assert shown == {message.pk for message in messages[: len(shown)]}
    assert 3 <= len(shown) <= 3 + int(elapsed * 1.0) + 1 < len(runs)


def _kept(instances):
    """The websocket stack with each consumer it makes kept for the test to look into."""

    async def consumer(scope, receive, send):
        instance = consumers.ConversationConsumer()
        instances.append(instance)
        return await instance(scope, receive, send)

    return AuthMiddlewareStack(URLRouter([path("ws/conversations/<uuid:conversation_id>/", consumer)]))


async def test_a_flood_of_run_ids_leaves_the_table_to_this_conversations_runs(user, other_user, settings):
    settings.WEBSOCKET_MESSAGE_BURST = 1000
    conversation, _, runs = await _finished_turns(user, 2)
    _, _, foreign_runs = await _finished_turns(other_user, 3)
    instances = []
    communicator = WebsocketCommunicator(
        _kept(instances),
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"cookie", await _session_cookie(user))],
    )
    assert (await communicator.connect())[0]
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    foreign = [run.pk for run in foreign_runs]
    for start in range(1, 20_000, 100):
        named = [*foreign, *range(runs[-1].pk + start, runs[-1].pk + start + 97), runs[0].pk]
        await communicator.send_to(text_data=json.dumps({"running": named}))
    (consumer,) = instances
    async with asyncio.timeout(60):
        while not communicator.input_queue.empty() or consumer.pusher is not None or consumer.dirty:
            await asyncio.sleep(0.01)
    await communicator.disconnect()
    assert consumer.streams.keys() <= {run.pk for run in runs}


HOSTILE_FRAMES = [
    '{"running":[Infinity]}',
    '{"running":[-Infinity]}',
    '{"running":[NaN]}',
    '{"running":[1e999]}',
    '{"running":[' + "9" * 4000 + "]}",
    '{"running":[18446744073709551616]}',
    '{"running":[-1, 0, 1.5, true]}',
    '{"running":[[1], {"id": 1}, null, "x", "\\ud800"]}',
    '{"running": 5}',
    '{"running": "12"}',
    '{"running": {"0": 1}}',
    '{"running": null}',
    '{"running":[1]',
    "[" * 4000,
    '{"running":[' + ",".join(["1"] * 5000) + "]}",
    '[{"running":[1]}]',
    '"running"',
    "null",
    "12",
    "not json",
    "\x00",
]


async def test_malformed_messages_are_ignored_quietly_and_the_socket_stays_open(user, settings, caplog):
    settings.WEBSOCKET_MESSAGE_BURST = 1000
    conversation, message, run = await _finished_conversation(user)
    communicator = await _connected(conversation, user)
    await _received(communicator, until=lambda html: "artifacts-changed" in html)
    for frame in HOSTILE_FRAMES:
        await communicator.send_to(text_data=frame)
    await communicator.send_to(bytes_data=json.dumps({"running": [run.pk]}).encode())
    assert await communicator.receive_nothing(timeout=0.5)
    # Still open, and still answering its page.
    await communicator.send_to(text_data=json.dumps({"running": [run.pk]}))
    html = await communicator.receive_from(timeout=waits.seconds(5))
    await communicator.disconnect()
    assert f'id="message-{message.pk}"' in html
    assert [record for record in caplog.records if record.levelno >= logging.WARNING] == []


@pytest.mark.parametrize(
    ("accept", "chosen", "stop"),
    [("zh-hans", "", "停止"), ("en", "zh-hans", "停止"), ("en", "", "Stop"), ("zh-CN,zh;q=0.9", "en", "Stop")],
)
async def test_a_websockets_pushes_speak_the_language_its_page_was_shown_in(user, accept, chosen, stop):
    """The browser's Accept-Language, unless its user chose a language."""
    if chosen:
        await sync_to_async(UserPreference.objects.create)(user=user, language=chosen)
    conversation = await _conversation(user, content="热泵的效率如何？")
    cookie = await _session_cookie(user)
    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost"), (b"cookie", cookie)]
    headers.append((b"accept-language", accept.encode()))
    communicator = WebsocketCommunicator(application, f"/ws/conversations/{conversation.pk}/", headers=headers)

    connected, _ = await communicator.connect()
    snapshot = await communicator.receive_from(timeout=waits.seconds(5))
    await communicator.disconnect()

    assert connected
    [button] = lxml.html.fromstring(f"<div>{snapshot}</div>").xpath("//button[@class='stop']")
    assert button.text_content() == stop


@sync_to_async
def _asked_in_turn(user, count):
    """`count` questions of the user's, each in a conversation of its own, enqueued as a page's would be."""
    return [lifecycle.conversation_start(user=user, content=f"Question {number}") for number in range(count)]


async def test_a_waiting_turn_shows_its_place_and_it_moves_up_live_as_earlier_turns_end(user, settings):
    settings.TURNS_PER_USER = 1
    first, second, third = await _asked_in_turn(user, 3)
    communicator = await _connected(third, user)
    page = Page()
    for html in await _received(communicator, until=lambda html: "artifacts-changed" in html):
        page.apply(html) if "artifacts-changed" not in html else None
    message_id = third.active_branch_id
    assert _words(page.find(f"activity-{message_id}").text_content()) == "Queued — 1 ahead of you…"

    # The first turn ends: the second is admitted, and this one is next.
    first_run = await sync_to_async(Run.objects.get)(message__conversation=first)
    await sync_to_async(run_cancel)(run_id=first_run.pk, user=user)
    for html in await _received(communicator, until=lambda html: f'id="activity-{message_id}"' in html):
        page.apply(html) if "artifacts-changed" not in html else None
    assert _words(page.find(f"activity-{message_id}").text_content()) == "Queued — next in line…"

    # The second ends: this one is admitted, queued for a worker.
    second_run = await sync_to_async(Run.objects.get)(message__conversation=second)
    await sync_to_async(run_cancel)(run_id=second_run.pk, user=user)
    for html in await _received(communicator, until=lambda html: 'data-status="queued"' in html):
        page.apply(html) if "artifacts-changed" not in html else None
    await communicator.disconnect()
    assert _words(page.find(f"activity-{message_id}").text_content()) == "Queued…"


def _tasks_of(consumer_class) -> list[asyncio.Task]:
    prefix = f"{consumer_class.__name__}."
    return [task for task in asyncio.all_tasks() if task.get_coro().__qualname__.startswith(prefix)]


async def _tasks_started(consumer_class) -> None:
    """The consumer has started its loops, the last thing its connect does."""
    await waits.until_async(lambda: _tasks_of(consumer_class), timeout=10)


async def _left_running(consumer_class) -> list[asyncio.Task]:
    """The consumer's tasks still running once cancelled ones have had time to end."""
    deadline = time.monotonic() + PUSH_WAIT
    while any(task.cancelling() for task in _tasks_of(consumer_class)) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return _tasks_of(consumer_class)


@pytest.mark.parametrize("opened", ["conversation", "user"])
async def test_a_socket_the_server_ends_without_a_disconnect_leaves_no_task_running(user, opened):
    # Daphne cancels an application that outlives its close timeout (a slow
    # disconnect, a busy machine); the socket's loops must not poll on for ever.
    if opened == "conversation":
        communicator, consumer_class = await _connected(await _conversation(user), user), consumers.ConversationConsumer
    else:
        communicator, consumer_class = await _user_opened(user), consumers.UserConsumer
    await _tasks_started(consumer_class)

    communicator.future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await communicator.future

    assert await _left_running(consumer_class) == []


class CancelLosingLayer(InMemoryChannelLayer):
    """A layer whose receive loses the cancellations that reach it in the half
    second after the first, and goes on waiting, as channels_redis's does when
    they land while redis-py connects."""

    first_lost = None

    async def receive(self, channel):
        while True:
            try:
                return await super().receive(channel)
            except asyncio.CancelledError:
                now = time.monotonic()
                CancelLosingLayer.first_lost = CancelLosingLayer.first_lost or now
                if now - CancelLosingLayer.first_lost > 0.5:
                    raise


async def test_a_listener_whose_cancellation_the_layer_lost_still_ends(user, settings, monkeypatch):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.CancelLosingLayer"}}
    monkeypatch.setattr(CancelLosingLayer, "first_lost", None)
    communicator = await _connected(await _conversation(user), user)
    await _tasks_started(consumers.ConversationConsumer)

    await communicator.disconnect()

    assert await _left_running(consumers.ConversationConsumer) == []
    assert CancelLosingLayer.first_lost is not None


@sync_to_async
def _shared(conversation, **audience):
    return ConversationShareFactory(conversation=conversation, **audience)


@sync_to_async
def _team(name, *members):
    team = Group.objects.create(name=name)
    team.user_set.add(*members)
    return team


@pytest.mark.events_by_hand
async def test_a_viewer_it_is_shared_with_receives_the_turn_live_without_its_controls(user, other_user):
    conversation, message, run, owner_socket, owner_page = await _watching_a_run(user)
    await _shared(conversation, user=other_user)
    viewer = await _connected(conversation, other_user)
    viewer_page = Page()
    for html in await _received(viewer, until=lambda html: "artifacts-changed" in html):
        viewer_page.apply(html) if "artifacts-changed" not in html else None
    write = _event_writer(run)

    await write(1, RunEvent.Type.METADATA, model="m")
    await write(2, RunEvent.Type.LLM_CHUNK, content="研究正在进行。")
    await get_channel_layer().group_send(
        conversation.group_name, {"type": realtime.RUN_EVENT, "run_id": run.pk, "seq": 2}
    )
    for communicator, page in ((viewer, viewer_page), (owner_socket, owner_page)):
        await _shows(communicator, page, f"answer-{message.pk}", "研究正在进行。", timeout=PUSH_WAIT)
    # The owner's page has Stop and Ask again; the viewer's, neither the composer nor a control.
    assert owner_page.find("composer-actions") is not None
    assert owner_page.find(f"message-{message.pk}").xpath(".//form")
    assert viewer_page.find("composer-actions") is None
    assert not viewer_page.find(f"message-{message.pk}").xpath(".//form | .//details[@class='edit']")
    await owner_socket.disconnect()
    await viewer.disconnect()


async def test_a_stranger_is_refused_however_the_conversation_is_shared_with_others(user, other_user):
    conversation = await _conversation(user)
    await _shared(conversation, user=await sync_to_async(UserFactory)())
    await _shared(conversation, group=await _team("Others"))
    assert not await _connects(await _communicator_for(conversation, other_user))


async def _communicator_for(conversation, user):
    return _communicator(conversation, await _session_cookie(user))


async def test_revoking_a_share_closes_the_viewers_socket_at_once_and_not_the_owners(user, other_user):
    conversation = await _conversation(user)
    share = await _shared(conversation, user=other_user)
    owner_browser, owner_cookie = await _browser(user)
    owner_socket = await _open(conversation, owner_cookie)
    viewer = await _open(conversation, (await _browser(other_user))[1])

    response = await sync_to_async(owner_browser.post)(
        reverse("share-delete", args=[conversation.pk]), {"share": share.pk}
    )
    assert response.status_code == 302
    # Not 1013: the page says it is no longer shared rather than reconnecting to a refusal.
    assert await _closed(viewer, timeout=waits.seconds(5)) == consumers.NO_LONGER_SHARED == 4403
    await _still_open(owner_socket, user)
    await owner_socket.disconnect()


async def test_leaving_the_group_closes_the_socket_while_everyone_else_keeps_theirs(user, other_user):
    conversation = await _conversation(user)
    colleague = await sync_to_async(UserFactory)()
    team = await _team("研究组", other_user, colleague)
    await _shared(conversation, group=team)
    leaving = await _open(conversation, (await _browser(other_user))[1])
    staying = await _open(conversation, (await _browser(colleague))[1])

    await sync_to_async(other_user.groups.remove)(team)

    assert await _closed(leaving, timeout=waits.seconds(5)) == consumers.NO_LONGER_SHARED
    await _still_open(staying, colleague)
    await staying.disconnect()


@sync_to_async
def _in_project(conversation, **member):
    """The conversation put in a project of its owner's, with `member` (a user
    or a group) as a reader: the membership."""
    project = ProjectFactory(owner=conversation.owner)
    Conversation.objects.filter(pk=conversation.pk).update(project=project)
    return ProjectMemberFactory(project=project, **member)


async def test_taking_a_reader_out_of_the_project_closes_their_socket_at_once_and_not_the_owners(user, other_user):
    conversation = await _conversation(user)
    member = await _in_project(conversation, user=other_user)
    owner_browser, owner_cookie = await _browser(user)
    owner_socket = await _open(conversation, owner_cookie)
    reader = await _open(conversation, (await _browser(other_user))[1])

    response = await sync_to_async(owner_browser.post)(
        reverse("project-member-remove", args=[member.project_id]), {"member": member.pk}
    )

    assert response.status_code == 302
    assert await _closed(reader, timeout=waits.seconds(5)) == consumers.NO_LONGER_SHARED
    await _still_open(owner_socket, user)
    await owner_socket.disconnect()


async def test_leaving_a_projects_group_or_the_conversation_leaving_the_project_closes_the_readers_socket(
    user, other_user
):
    conversation = await _conversation(user, content="热泵周报？")
    colleague = await sync_to_async(UserFactory)()
    team = await _team("项目读者", other_user, colleague)
    member = await _in_project(conversation, group=team, user=None)
    leaving = await _open(conversation, (await _browser(other_user))[1])
    staying = await _open(conversation, (await _browser(colleague))[1])

    await sync_to_async(other_user.groups.remove)(team)

    assert await _closed(leaving, timeout=waits.seconds(5)) == consumers.NO_LONGER_SHARED
    await _still_open(staying, colleague)
    moved = await sync_to_async(lambda: Conversation.objects.get(pk=conversation.pk))()
    await sync_to_async(project_services.conversation_move)(conversation=moved, user=user, project=None)
    assert await _closed(staying, timeout=waits.seconds(5)) == consumers.NO_LONGER_SHARED
    assert await sync_to_async(ProjectMember.objects.filter(pk=member.pk).exists)()


def _manage_shell(code: str) -> None:
    """`code` run by `manage.py shell` in a process of its own, as an
    administrator would, on the test's database and channel layer; it exits
    as soon as the code has run."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": database_url()}
    shell = [sys.executable, "manage.py", "shell", "--no-imports", "-c", code]
    done = subprocess.run(shell, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.processes
@pytest.mark.parametrize("change", ["member.groups.remove(team)", "team.delete()"])
async def test_a_group_changed_from_another_process_closes_the_readers_socket_at_once(
    user, other_user, settings, change
):
    # Long past the test's wait: only the change's own wake-up can close the socket.
    settings.WEBSOCKET_SESSION_CHECK_INTERVAL = 600
    conversation = await _conversation(user)
    team = await _team("研究组", user, other_user)
    await _shared(conversation, group=team)
    reader = await _open(conversation, (await _browser(other_user))[1])
    owner_socket = await _open(conversation, (await _browser(user))[1])

    await sync_to_async(_manage_shell)(
        "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Group; "
        f"team = Group.objects.get(pk={team.pk}); member = get_user_model().objects.get(pk={other_user.pk}); {change}"
    )

    assert await _closed(reader, timeout=waits.seconds(30)) == consumers.NO_LONGER_SHARED
    await _still_open(owner_socket, user)
    await owner_socket.disconnect()


async def test_a_viewer_still_let_in_another_way_keeps_the_socket(user, other_user):
    conversation = await _conversation(user)
    by_name = await _shared(conversation, user=other_user)
    await _shared(conversation, everyone=True)
    viewer = await _open(conversation, (await _browser(other_user))[1])

    await sync_to_async(by_name.delete)()

    await _still_open(viewer, other_user)
    await viewer.disconnect()


async def test_deleting_a_shared_conversation_closes_its_viewers_sockets(user, other_user):
    conversation, _, _ = await _finished_conversation(user)
    await _shared(conversation, user=other_user)
    viewer = await _open(conversation, (await _browser(other_user))[1])

    await sync_to_async(lifecycle.conversation_delete)(conversation=conversation)

    assert await _closed(viewer, timeout=waits.seconds(5)) == consumers.NO_LONGER_SHARED


async def test_a_title_the_model_proposed_reaches_the_pages_head(user):
    conversation = await _conversation(user)
    communicator = await _open(conversation, await _session_cookie(user))

    await get_channel_layer().group_send(
        conversation.group_name, {"type": realtime.TITLE_CHANGED, "title": "热泵 <b>在</b> 低温"}
    )

    # After what the connection itself sends on opening, which a busy machine may deliver later.
    pushed = await _received(communicator, until=lambda html: "conversation-title" in html, timeout=waits.seconds(5))
    [heading] = lxml.html.fragment_fromstring(pushed[-1], create_parent=True)
    assert (heading.tag, heading.get("id"), heading.get("hx-swap-oob")) == ("h1", "conversation-title", "true")
    assert heading.text_content() == "热泵 <b>在</b> 低温"
    await communicator.disconnect()


async def test_a_wake_up_reaches_the_page_while_page_views_hold_the_shared_thread(user):
    """Page views and questions run one at a time in asgiref's one
    thread-sensitive thread; a socket's wake-ups do not queue behind them."""
    conversation = await _conversation(user)
    communicator = await _open(conversation, await _session_cookie(user))
    release = threading.Event()
    held = asyncio.ensure_future(sync_to_async(release.wait, thread_sensitive=True)(waits.seconds(30)))
    try:
        await get_channel_layer().group_send(
            conversation.group_name, {"type": realtime.TITLE_CHANGED, "title": "热泵在低温下"}
        )

        pushed = await _received(communicator, until=lambda html: "conversation-title" in html)
        assert "热泵在低温下" in pushed[-1]
        assert not held.done()
    finally:
        release.set()
        await held
    await communicator.disconnect()


async def test_a_page_that_connects_after_the_model_named_its_conversation_is_sent_the_title(user):
    # The title's push went out while the page loaded, to no one: the connection brings the title.
    conversation = await _conversation(user)
    await Conversation.objects.filter(pk=conversation.pk).aupdate(
        title="严寒地区的空气源热泵", metadata={TITLE_SOURCE: SOURCE_MODEL}
    )

    communicator = await _connected(conversation, user)
    messages = await _received(communicator, until=lambda html: "artifacts-changed" in html)
    await communicator.disconnect()

    headings = [m for m in messages if 'id="conversation-title"' in m]
    assert len(headings) == 1 and "严寒地区的空气源热泵" in headings[0] and 'hx-swap-oob="true"' in headings[0]


async def test_a_page_of_a_conversation_the_model_did_not_name_is_sent_no_title_on_connecting(user):
    conversation = await _conversation(user)

    communicator = await _connected(conversation, user)
    messages = await _received(communicator, until=lambda html: "artifacts-changed" in html)
    await communicator.disconnect()

    assert not [m for m in messages if "conversation-title" in m]


# The list's marks and the tab title's count, over the one websocket a page holds.


def _user_socket(cookie=b""):
    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost")]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, "/ws/user/", headers=headers)


async def _user_opened(user):
    communicator = _user_socket(await _session_cookie(user))
    connected, _ = await communicator.connect()
    assert connected
    # On connect: the count, with the marks there are.
    await _received(communicator, until=lambda html: "attention-count" in html)
    return communicator


async def _mark_pushed(communicator, conversation_id, mark, *, timeout=PUSH_WAIT) -> str:
    """The next push that marks the conversation so (`mark` "" for no mark)."""
    wanted = f'id="run-mark-{conversation_id}" class="run-mark"' + (f' data-mark="{mark}"' if mark else " ")
    async with asyncio.timeout(timeout):
        while True:
            html = await communicator.receive_from(timeout=timeout)
            if wanted in html:
                return html


@sync_to_async
def _run_waits(run):
    run.status = Run.Status.WAITING_PERMISSION
    run.save(update_fields=["status"])


@sync_to_async
def _run_ends(run):
    run.status, run.finished_at = Run.Status.COMPLETED, timezone.now()
    run.save(update_fields=["status", "finished_at"])


async def test_a_user_websocket_needs_a_signed_in_user(user):
    assert not await _connects(_user_socket())


async def test_a_run_waiting_for_approval_is_pushed_to_the_owners_one_socket_and_not_to_another_users(user, other_user):
    conversation = await _conversation(user, content="要批准吗？")
    run = await sync_to_async(Run.objects.get)(message__conversation=conversation)
    mine, theirs = await _user_opened(user), await _user_opened(other_user)

    await _run_waits(run)

    html = await _mark_pushed(mine, conversation.pk, "waiting")
    assert 'hx-swap-oob="true"' in html and "Waiting for your approval" in html
    assert '<span id="attention-count" data-count="1" hidden hx-swap-oob="true">' in html
    assert await theirs.receive_nothing(timeout=1)
    await mine.disconnect()
    await theirs.disconnect()


async def test_a_conversations_socket_carries_the_marks_of_the_users_other_conversations(user):
    shown = await _conversation(user)
    elsewhere = await _conversation(user, content="另一个")
    run = await sync_to_async(Run.objects.get)(message__conversation=elsewhere)
    communicator = await _connected(shown, user)

    await _run_ends(run)

    html = await _mark_pushed(communicator, elsewhere.pk, "finished")
    assert "has finished" in html and 'data-count="1"' in html
    await communicator.disconnect()


async def test_a_turn_that_ends_on_the_page_showing_it_is_seen_there_and_no_mark_is_left(user):
    conversation = await _conversation(user)
    run = await sync_to_async(Run.objects.get)(message__conversation=conversation)
    page, other_tab = await _connected(conversation, user), await _user_opened(user)

    await _run_ends(run)

    # The page showing it: no mark, but what a hidden tab would notify; the
    # other tab hears that it was seen.
    html = await _mark_pushed(page, conversation.pk, "")
    assert 'data-count="0"' in html and "“Question?” has finished" in html
    await _mark_pushed(other_tab, conversation.pk, "")
    state = await sync_to_async(agent_selectors.conversation_marks)(user=user)
    assert state.marks == {}
    await page.disconnect()
    await other_tab.disconnect()


async def test_a_user_websocket_closes_when_its_session_signs_out(user):
    browser, cookie = await _browser(user)
    communicator = _user_socket(cookie)
    connected, _ = await communicator.connect()
    assert connected

    await sync_to_async(browser.post)(reverse("logout"))

    assert await _closed(communicator) == consumers.SIGNED_OUT
