"""A small internal REST service for the HTTP tool tests: a real server on
127.0.0.1 that records every request it gets (method, path, query, headers,
body) and answers by path."""

import base64
import html
import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, quote, quote_plus, urlsplit

from tests.local_server import LocalServer

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _basic(value: str) -> str:
    """Of "Basic <base64 of user:password>", the user:password."""
    return base64.b64decode(value.split()[1]).decode()


# The ways a service's error page may repeat an Authorization header's value
# (`/echo401/<form>` answers 401 with it so), by name.
ECHOES = {
    "plain": lambda value: value,
    # PHP's json_encode escapes "/" by default.
    "json_slash": lambda value: json.dumps(value)[1:-1].replace("/", "\\/"),
    "json_unicode": lambda value: "".join(c if c.isalnum() else f"\\u{ord(c):04X}" for c in value),
    "json_unicode_lower": lambda value: "".join(c if c.isalnum() else f"\\u{ord(c):04x}" for c in value),
    "percent": lambda value: quote(value, safe=""),
    "percent_lower": lambda value: "".join(
        c if c.isalnum() else "".join(f"%{b:02x}" for b in c.encode()) for c in value
    ),
    "form": lambda value: quote_plus(value),
    "base64": lambda value: _b64(value),
    "base64_token": lambda value: _b64(value.split()[-1]),
    "base64_urlsafe": lambda value: base64.urlsafe_b64encode(value.split()[-1].encode()).decode().rstrip("="),
    "base64_user": lambda value: _b64(f"api-user:{value.split()[-1]}"),
    "base64_glued": lambda value: "sessionid" + _b64(f"k={value.split()[-1]}"),
    "html": lambda value: html.escape(value).replace("/", "&#x2F;").replace("+", "&#43;"),
    "html_named": lambda value: value.replace("/", "&sol;").replace("+", "&plus;").replace("=", "&equals;"),
    "mixed": lambda value: value.replace("/", "\\/").replace("+", "%2b").replace("=", "&#61;"),
    "basic_decoded": lambda value: _basic(value),
    "basic_password": lambda value: _basic(value).partition(":")[2],
    "basic_password_json": lambda value: json.dumps(_basic(value).partition(":")[2])[1:-1].replace("/", "\\/"),
    # Past the start of the body that a tool error quotes: a cut there must not leave part of it.
    "late": lambda value: "x" * 440 + " " + value,
}


@dataclass
class Received:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes
    # The request's target as it came, path and query, not decoded.
    target: str = ""


@dataclass
class Service(LocalServer):
    received: list = field(default_factory=list)
    # Seconds /slow waits before answering.
    slow_seconds: float = 5.0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    @property
    def url(self) -> str:
        return self.origin


def _handler_for(service: Service):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self._answer()

        do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

        def _answer(self):
            parts = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
            received = Received(
                self.command, parts.path, parse_qs(parts.query), dict(self.headers.items()), body, target=self.path
            )
            service.received.append(received)
            try:
                self._route(received)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the tool hung up at its timeout

        def _route(self, received: Received):
            path = received.path
            if path.startswith("/api/tickets/"):
                ticket = path.removeprefix("/api/tickets/")
                data = {"data": {"ticket": ticket, "query": received.query, "body": _json(received.body)}}
                self._send(200, "application/json", json.dumps(data).encode())
            elif path == "/echo":
                # An error page that repeats the request's headers, as some do.
                self._send(500, "text/plain", json.dumps(received.headers).encode())
            elif path.startswith("/echo401/"):
                echo = ECHOES[path.removeprefix("/echo401/")](received.headers.get("Authorization", ""))
                self._send(401, "application/json", f'{{"error": "bad token", "got": "{echo}"}}'.encode())
            elif path == "/moved-echo":
                self.send_response(302)
                self.send_header(
                    "Location",
                    "http://elsewhere.invalid/login?token=" + quote(received.headers.get("Authorization", ""), safe=""),
                )
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/fail":
                self._send(500, "text/plain", b"the database is down")
            elif path == "/slow":
                time.sleep(service.slow_seconds)
                self._send(200, "text/plain", b"late")
            elif path == "/moved":
                self.send_response(302)
                self.send_header("Location", "http://elsewhere.invalid/steal")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/chart.png":
                self._send(200, "image/png", PNG)
            elif path == "/big":
                self._send(200, "text/plain", b"x" * (3 * 1024 * 1024))
            else:
                self._send(200, "text/plain; charset=utf-8", "你好 from the root".encode())

        def _send(self, status: int, content_type: str, body: bytes):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    return Handler


def _json(body: bytes):
    return json.loads(body) if body else None
