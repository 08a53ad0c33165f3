"""Headers every response carries: the Content-Security-Policy, and no caching
of a signed-in user's pages and downloads."""

import re

import pytest
from asgiref.testing import ApplicationCommunicator
from django.urls import reverse

from artifactflow.asgi import application
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from tests.asgi import http_scope
from tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db

POLICY = {
    "default-src": {"'self'"},
    "script-src": {"'self'"},
    "style-src": {"'self'"},
    "img-src": {"'self'", "data:"},
    "connect-src": {"'self'"},
    "font-src": {"'self'"},
    "object-src": {"'none'"},
    "base-uri": {"'none'"},
    "form-action": {"'self'"},
    "frame-ancestors": {"'none'"},
}
# What the policy forbids in markup: inline scripts, inline handlers
# (onclick=, hx-on:), inline styles.
INLINE = re.compile(r"<script(?![^>]*\ssrc=)[^>]*>|\son[a-z]+=|\shx-on|\sstyle=", re.IGNORECASE)


def _policy(response) -> dict[str, set[str]]:
    directives = (d.split() for d in response["Content-Security-Policy"].split(";"))
    return {name: set(values) for name, *values in directives}


@pytest.fixture
def conversation(user):
    conversation = ConversationFactory(owner=user)
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.create(artifact_id="report", content="# Report\n\n![chart](https://cdn.example/chart.png)")
    manager.flush_all()
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.rewrite(artifact_id="report", content="# Report v2")
    manager.flush_all()
    return conversation


def _pages(conversation):
    pane = reverse("artifact-detail", args=[conversation.pk, "report"])
    return [
        reverse("chat"),
        conversation.get_absolute_url(),
        pane,
        pane + "?version=1",
        reverse("artifact-diff", args=[conversation.pk, "report"]) + "?from=1&to=2",
        reverse("artifact-edit", args=[conversation.pk, "report"]),
    ]


def test_every_page_has_the_policy_and_nothing_inline_it_would_block(client, user, conversation):
    client.force_login(user)
    for url in _pages(conversation):
        response = client.get(url)
        assert response.status_code == 200, url
        assert _policy(response) == POLICY, url
        html = response.content.decode()
        assert not INLINE.findall(html), (url, INLINE.findall(html))
        assert "<img" not in html and "{#" not in html, url
    client.logout()
    for url in (reverse("login"), reverse("admin:login")):
        assert _policy(client.get(url)) == POLICY, url


def test_signed_in_pages_and_downloads_are_never_cached(client, user, conversation):
    client.force_login(user)
    downloads = [
        reverse("artifact-raw", args=[conversation.pk, "report"]),
        reverse("artifact-export-docx", args=[conversation.pk, "report"]),
    ]
    for url in _pages(conversation) + downloads:
        cache_control = client.get(url)["Cache-Control"]
        assert "no-store" in cache_control and "private" in cache_control, url
    # Static files are the same for everyone and may be cached.
    assert "no-store" not in client.get("/static/js/app.js")["Cache-Control"]


async def _asgi_get(path: str, *, cookie: str = "") -> tuple[int, dict[bytes, bytes], bytes]:
    communicator = ApplicationCommunicator(
        application, http_scope(method="GET", path=path, headers=[(b"cookie", cookie.encode())])
    )
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(timeout=10)
    body = b""
    while True:
        message = await communicator.receive_output(timeout=10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            return start["status"], {name.lower(): value for name, value in start["headers"]}, body


@pytest.mark.django_db(transaction=True)
async def test_through_the_async_middleware_chain_too_static_files_are_served_and_pages_never_cached(
    signed_in, conversation
):
    # Every middleware runs async under the ASGI server (artifactflow.middleware.StaticFilesMiddleware).
    cookie = f"sessionid={signed_in.cookies['sessionid'].value}"

    page_status, page_headers, _ = await _asgi_get(conversation.get_absolute_url(), cookie=cookie)
    static_status, static_headers, script = await _asgi_get("/static/js/app.js", cookie=cookie)

    assert page_status == 200 and b"no-store" in page_headers[b"cache-control"]
    assert static_status == 200 and b"no-store" not in static_headers.get(b"cache-control", b"")
    assert script.startswith(b"// Enter sends the message")
