"""A socket the server side closes cleanly, as a proxy does when the server
behind it restarts: the page says it is reconnecting, comes back by itself and
catches up with what happened meanwhile (static/js/socket.js)."""

import contextlib
import socket
import threading

import pytest
from playwright.sync_api import expect

from tests import waits
from tests.e2e.test_first_turn import PARTIAL_ANSWER_JS, TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

GOING_AWAY = 1001
LAST_SENTENCE = "Last word: reconnected."
ANSWER = " ".join(f"Sentence {n} of an answer that streams for a while." for n in range(1, 40)) + f"\n\n{LAST_SENTENCE}"


class _Connection:
    """One browser connection through the proxy, and the portal's end of it."""

    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client = client
        self.upstream = upstream
        self.websocket = False
        # What goes to the browser goes in whole websocket frames, so a close
        # frame of the proxy's own never lands inside one of the portal's, and
        # nothing follows that close frame (a browser reports a frame after it).
        self.to_client = threading.Lock()
        self.closed_to_client = False

    def close(self):
        for end in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


class ClosingProxy:
    """A TCP proxy in front of the portal that can close its websockets with a
    clean close frame and, meanwhile, hold new connections until let through."""

    def __init__(self, *, upstream_port: int):
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.connections: list[_Connection] = []
        self.websockets_opened = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        self.flowing.wait()
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        connection = _Connection(client, upstream)
        self.connections.append(connection)
        threading.Thread(target=self._to_portal, args=(connection,), daemon=True).start()
        threading.Thread(target=self._to_browser, args=(connection,), daemon=True).start()

    def _to_portal(self, connection):
        with contextlib.suppress(OSError):
            while data := connection.client.recv(65536):
                if not connection.websocket and b"upgrade: websocket" in data.lower():
                    connection.websocket = True
                    self.websockets_opened += 1
                connection.upstream.sendall(data)
        connection.close()

    def _to_browser(self, connection):
        buffer = b""
        handshake_done = False
        with contextlib.suppress(OSError):
            while data := connection.upstream.recv(65536):
                buffer += data
                if not connection.websocket:
                    connection.client.sendall(buffer)
                    buffer = b""
                    continue
                if not handshake_done:
                    end = buffer.find(b"\r\n\r\n")
                    if end < 0:
                        continue
                    handshake_done = True
                    with connection.to_client:
                        connection.client.sendall(buffer[: end + 4])
                    buffer = buffer[end + 4 :]
                while (size := _frame_size(buffer)) is not None:
                    with connection.to_client:
                        if connection.closed_to_client:
                            return
                        connection.client.sendall(buffer[:size])
                    buffer = buffer[size:]
        connection.close()

    def close_websockets(self, *, code: int):
        """Sends each open websocket a close frame with `code`, then hangs up on both ends."""
        for connection in [c for c in self.connections if c.websocket]:
            with connection.to_client, contextlib.suppress(OSError):
                connection.closed_to_client = True
                connection.client.sendall(bytes([0x88, 2]) + code.to_bytes(2, "big"))
            connection.close()
            self.connections.remove(connection)

    def stop(self):
        self.flowing.set()
        self.listener.close()
        for connection in self.connections:
            connection.close()


def _frame_size(buffer: bytes) -> int | None:
    """The length of the whole server frame at the start of `buffer`, or None until it is all there."""
    if len(buffer) < 2:
        return None
    length, header = buffer[1] & 0x7F, 2
    if length == 126:
        if len(buffer) < 4:
            return None
        length, header = int.from_bytes(buffer[2:4], "big"), 4
    elif length == 127:
        if len(buffer) < 10:
            return None
        length, header = int.from_bytes(buffer[2:10], "big"), 10
    return header + length if len(buffer) >= header + length else None


@pytest.fixture
def proxy(portal):
    running = ClosingProxy(upstream_port=int(portal.base_url.rsplit(":", 1)[1]))
    yield running
    running.stop()


def _run_status(portal, *, message_id: str) -> str:
    code = f"from agents.models import Run; print(Run.objects.get(message_id={int(message_id)}).status)"
    return portal.shell(code).strip()


def test_a_socket_closed_cleanly_reconnects_and_catches_up(portal, model_server, proxy, new_page, screenshot):
    user = portal.user_create(prefix="reconnect")
    # Streamed for a few seconds before it holds, so the worker writes rows of it
    # (a row a second, while text comes): a page that missed the first pieces
    # shows the text from them.
    model_server.add(Text(ANSWER, chunk_size=16, delay=0.02, hold=LAST_SENTENCE))
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=user, base_url=proxy.base_url)
    ask(page, question="Will this page come back by itself?")
    turn = page.locator("article.turn")
    page.wait_for_function(PARTIAL_ANSWER_JS, arg=["article.turn .answer", LAST_SENTENCE], timeout=TURN_TIMEOUT)
    message_id = turn.get_attribute("id").removeprefix("message-")
    opened = proxy.websockets_opened
    notice = page.locator("#reconnecting")
    expect(notice).to_be_empty()

    # The server goes away cleanly, and is not back until the answer has ended.
    proxy.flowing.clear()
    proxy.close_websockets(code=GOING_AWAY)
    expect(notice).to_have_text("Reconnecting…")
    expect(notice).to_be_visible()
    screenshot(page, name="reconnecting")
    model_server.release()
    waits.until(lambda: _run_status(portal, message_id=message_id) == "completed", timeout=60, interval=0.1)
    assert LAST_SENTENCE not in turn.locator(".answer").inner_text()
    expect(turn).to_have_attribute("data-status", "running")

    # The server is back: the page reconnects on its own and shows the answer whole.
    proxy.flowing.set()
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turn.locator(".answer")).to_contain_text(LAST_SENTENCE)
    expect(notice).to_be_empty()
    expect(notice).to_be_hidden()
    assert proxy.websockets_opened > opened
