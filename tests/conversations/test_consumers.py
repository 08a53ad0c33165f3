import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections
from django.test import Client

from agents import services as agent_services
from artifactflow.asgi import application
from conversations import services
from tests.model_server import Text

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def _session_cookie(user):
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


@sync_to_async
def _conversation(user, content="Question?"):
    return services.conversation_start(user=user, content=content, enqueue=False)


def _execute_in_thread(run_id):
    try:
        agent_services.run_execute(run_id=run_id)
    finally:
        connections.close_all()


def _communicator(conversation, cookie=b"", origin=b"http://localhost"):
    headers = [(b"origin", origin)]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, f"/ws/conversations/{conversation.pk}/", headers=headers)


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


@pytest.mark.parametrize(
    "path", ["/ws/nothing/", "/ws/conversations/not-a-uuid/", f"/ws/conversations/{uuid.uuid4()}/", "/", "/admin/"]
)
async def test_a_websocket_nothing_serves_is_refused_cleanly(user, path):
    headers = [(b"origin", b"http://localhost"), (b"cookie", await _session_cookie(user))]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    # A server error would raise here instead of answering.
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    assert not connected


async def test_a_foreign_origin_is_refused(user):
    conversation = await _conversation(user)
    communicator = _communicator(conversation, await _session_cookie(user), origin=b"https://evil.example")
    assert not await _connects(communicator)


async def test_the_owner_gets_the_thread_on_connect(user):
    conversation = await _conversation(user, "Where is my thread?")
    communicator = _communicator(conversation, await _session_cookie(user))
    connected, _ = await communicator.connect()
    assert connected
    html = await communicator.receive_from(timeout=5)
    nudge = await communicator.receive_from(timeout=5)
    await communicator.disconnect()
    assert 'id="thread" class="thread" hx-swap-oob="true"' in html
    assert 'id="artifacts-changed" hx-swap-oob="true"' in nudge
    assert "Where is my thread?" in html


async def test_a_turn_streams_message_snapshots_to_the_page(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.0
    answer = "Streaming works end to end."
    scripted_model.add(Text(answer, chunk_size=5, delay=0.02))
    conversation = await _conversation(user)
    message = conversation.active_branch
    communicator = _communicator(conversation, await _session_cookie(user))
    await communicator.connect()
    await communicator.receive_from(timeout=5)  # the thread on connect
    await communicator.receive_from(timeout=5)  # and a nudge to refresh the artifact pane

    run = await sync_to_async(message.runs.get)()
    # A plain thread, as in a worker process: the channel layer takes its own
    # thread-sensitive executor to publish.
    await asyncio.to_thread(_execute_in_thread, run.pk)

    snapshots = []
    while not snapshots or 'data-status="completed"' not in snapshots[-1]:
        snapshots.append(await communicator.receive_from(timeout=10))
    await communicator.disconnect()
    assert all(f'id="message-{message.pk}"' in html and 'hx-swap-oob="true"' in html for html in snapshots)
    assert any('data-status="running"' in html for html in snapshots)
    assert answer in snapshots[-1]
