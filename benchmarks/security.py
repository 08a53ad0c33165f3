"""What the hardening costs and saves, each against a baseline in the same run:
an upload far over the limit, read whole by Django (baseline) or refused at its
headers by the request-body cap; a signed-in page with and without the
security middleware (CSP, no-store, sign-in throttling); and a long answer
full of images rendered with images as links or as markdown-it's <img>."""

import asyncio
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from artifactflow import markdown
from artifactflow.asgi import application, django_asgi_app
from conversations import lifecycle
from tests.asgi import http_scope

UPLOAD_BYTES = 50 * 1024 * 1024
CHUNK = 64 * 1024
PAGE_REQUESTS = 200
# About 5,000 tokens of prose, then 400 images in the same paragraph.
IMAGE_ANSWER = "The heat pump moves heat rather than making it. " * 500 + " ".join(
    f"![figure {i}](https://example.org/f{i}.png)" for i in range(400)
)
SECURITY_MIDDLEWARE = {
    "csp.middleware.CSPMiddleware",
    "artifactflow.middleware.PrivateCacheMiddleware",
    "axes.middleware.AxesMiddleware",
}


async def _upload(app) -> tuple[float, int, int]:
    """Seconds to the response, bytes the app pulled, and the status."""
    scope = http_scope(headers=[(b"content-length", str(UPLOAD_BYTES).encode())])
    chunk = b"x" * CHUNK
    pulled = 0
    status = None
    answered = asyncio.Event()

    async def receive():
        nonlocal pulled
        if pulled < UPLOAD_BYTES:
            pulled += CHUNK
            return {"type": "http.request", "body": chunk, "more_body": pulled < UPLOAD_BYTES}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif not message.get("more_body"):
            answered.set()

    started = time.perf_counter()
    await app(scope, receive, send)
    return time.perf_counter() - started, pulled, status


def _pages(client, url) -> float:
    assert client.get(url).status_code == 200  # and warm up
    started = time.perf_counter()
    for _ in range(PAGE_REQUESTS):
        client.get(url)
    return (time.perf_counter() - started) / PAGE_REQUESTS


def main():
    read_time, read_bytes, read_status = asyncio.run(_upload(django_asgi_app))
    cap_time, cap_bytes, cap_status = asyncio.run(_upload(application))
    print(f"an upload of {UPLOAD_BYTES / 2**20:.0f} MB (limit {settings.ARTIFACT_UPLOAD_MAX_BYTES / 2**20:.0f} MB):")
    print(
        f"  read whole by Django (baseline): {read_time * 1000:8.1f} ms, {read_bytes / 2**20:5.1f} MB read, then {read_status}"
    )
    print(
        f"  refused by the request-body cap: {cap_time * 1000:8.1f} ms, {cap_bytes / 2**20:5.1f} MB read, then {cap_status}"
    )
    print(f"  ratio: {read_time / cap_time:.0f}x sooner, {read_bytes - cap_bytes} bytes fewer read")

    user, _ = get_user_model().objects.get_or_create(username="bench-security")
    conversation = lifecycle.conversation_start(user=user, content="How do heat pumps work?", enqueue=False)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    url = conversation.get_absolute_url()
    with override_settings(MIDDLEWARE=[m for m in settings.MIDDLEWARE if m not in SECURITY_MIDDLEWARE]):
        plain = _pages(client, url)
    hardened = _pages(client, url)
    print(f"a signed-in conversation page, {PAGE_REQUESTS} requests:")
    print(f"  without the security middleware (baseline): {plain * 1000:6.2f} ms a page")
    print(f"  with CSP, no-store and sign-in throttling:  {hardened * 1000:6.2f} ms a page")
    print(f"  ratio: {hardened / plain:.2f}x")

    images_as_links = _render_best(IMAGE_ANSWER)
    markdown._md.add_render_rule("image", type(markdown._md.renderer).image)
    try:
        images_as_img = _render_best(IMAGE_ANSWER)
    finally:
        markdown._md.add_render_rule("image", markdown._image_as_link)
    print(f"a {len(IMAGE_ANSWER)}-character answer with 400 images (best of 5):")
    print(f"  images as <img> (baseline, then dropped by nh3): {images_as_img * 1000:6.1f} ms")
    print(f"  images as links:                                 {images_as_links * 1000:6.1f} ms")
    print(f"  ratio: {images_as_links / images_as_img:.2f}x")


def _render_best(text: str) -> float:
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        markdown.markdown_render(text)
        timings.append(time.perf_counter() - started)
    return min(timings)
