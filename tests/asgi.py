"""A plain HTTP request as an ASGI server hands it to the application, and a
conversation's websocket opened as a browser opens it."""

from channels.testing import WebsocketCommunicator
from django.conf import settings

from artifactflow.asgi import application

UPLOAD_PATH = "/c/00000000-0000-0000-0000-000000000000/artifacts/"


def http_scope(*, method: str = "POST", path: str = UPLOAD_PATH, headers=()) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def session_cookie(client) -> bytes:
    """The Cookie header of a signed-in test client's session."""
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def conversation_socket(conversation_id, *, cookie=b"", origin=b"http://localhost", host=b"localhost"):
    """A handshake with the Host and Origin every browser sends, from the site's own page by default."""
    headers = [(b"host", host), (b"origin", origin)]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, f"/ws/conversations/{conversation_id}/", headers=headers)
