"""A cap on request bodies, applied before Django reads one.

Django's ASGI handler reads a whole request body (to a temporary file) before
any middleware or view runs, so a view's size check comes after a 2 GB upload
has been copied to disk. This wrapper answers 413 as soon as the declared
length is over the cap, without reading the body, and stops a body without a
declared length as soon as it grows past the cap.
"""

from collections.abc import Callable

from django.conf import settings


class RequestBodyLimit:
    """`refusal` gives the 413's text for a connection's scope: the apps know
    what to tell the person and in which language (artifactflow.asgi)."""

    def __init__(self, app, *, refusal: Callable[[dict], str]):
        self.app = app
        self.refusal = refusal

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = settings.REQUEST_BODY_MAX_BYTES
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            return await _refuse(send, body=self.refusal(scope).encode())

        received = 0
        refused = False

        async def receive_counted():
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    await _refuse(send, body=self.refusal(scope).encode())
                    # Django stops reading and sends nothing.
                    return {"type": "http.disconnect"}
            return message

        async def send_unless_refused(message):
            if not refused:
                await send(message)

        await self.app(scope, receive_counted, send_unless_refused)


async def _refuse(send, *, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                # The client is still sending; this connection is done.
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
