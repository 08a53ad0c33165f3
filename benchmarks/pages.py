"""Pages bounded by what they show: the chat page, a "Load more" page of the
conversation list and a search, for a user with 10 conversations (baseline)
and one with 1,000, while a third user has 40,000 messages with the searched
word. Each should cost the large user about what it costs the small one.
Also the sizes, plain and gzipped, and the small user's search before the
third user's messages existed."""

import statistics
import time
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from artifacts.models import Artifact, ArtifactSession
from conversations import selectors
from conversations.models import Conversation, Message

REQUESTS = 30
# Typed as far as this: the last word of a search matches as a prefix.
SEARCHED = "postgr"
HTMX = {"HTTP_HX_REQUEST": "true"}
ANSWER = (
    "A heat pump moves heat rather than making it: the refrigerant evaporates outside, "
    "is compressed, and gives its heat up indoors as it condenses. "
) * 4


def _conversations(user, count: int, *, matching_every: int) -> list[Conversation]:
    """`count` conversations of two questions and answers and a report each;
    every `matching_every`-th mentions Postgres."""
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=user, title=f"Conversation {i} about heat pumps") for i in range(count)
    )
    ArtifactSession.objects.bulk_create(ArtifactSession(conversation=c) for c in conversations)
    messages, artifacts = [], []
    for i, conversation in enumerate(conversations):
        topic = "Postgres and SQLite" if i % matching_every == 0 else "heat pumps"
        for n in range(2):
            messages.append(Message(conversation=conversation, content=f"Question {n} on {topic}?", response=ANSWER))
        artifacts.append(Artifact(session_id=conversation.pk, artifact_id="report", title="Report", content=ANSWER))
    Message.objects.bulk_create(messages, batch_size=1000)
    Artifact.objects.bulk_create(artifacts, batch_size=1000)
    # Distinct times, a minute apart, as conversations touched one after another.
    now = timezone.now()
    for i, conversation in enumerate(conversations):
        conversation.updated_at = now - timedelta(minutes=i)
    Conversation.objects.bulk_update(conversations, ["updated_at"], batch_size=1000)
    return conversations


def _noise(user, *, messages: int, per_conversation: int = 100) -> None:
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=user, title=f"Noise {i}") for i in range(messages // per_conversation)
    )
    Message.objects.bulk_create(
        (
            Message(conversation=conversation, content=f"Is Postgres faster, try {n}?", response=ANSWER)
            for conversation in conversations
            for n in range(per_conversation)
        ),
        batch_size=2000,
    )


def _analyze() -> None:
    if connection.vendor == "postgresql":
        # What autovacuum would have done by now, for the planner.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def _timed(client: Client, url: str, **headers) -> tuple[float, int, int]:
    """Median seconds a request, bytes of the body, and bytes gzipped."""
    response = client.get(url, **headers)
    assert response.status_code == 200, (url, response.status_code)
    timings = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        client.get(url, **headers)
        timings.append(time.perf_counter() - started)
    gzipped = client.get(url, HTTP_ACCEPT_ENCODING="gzip", **headers)
    assert gzipped["Content-Encoding"] == "gzip"
    return statistics.median(timings), len(response.content), len(gzipped.content)


def _client(user) -> Client:
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def _measure(user, *, before: str) -> dict[str, tuple[float, int, int]]:
    client = _client(user)
    search = reverse("conversation-search")
    return {
        "chat page": _timed(client, reverse("chat")),
        "list page (load more)": _timed(client, f"{search}?before={before}", **HTMX),
        f"search “{SEARCHED}”": _timed(client, f"{search}?q={SEARCHED}", **HTMX),
    }


def _report(label: str, small: tuple[float, int, int], large: tuple[float, int, int]) -> None:
    print(f"  {label}:")
    for who, (seconds, size, gzipped) in (("A, 10 conversations (baseline)", small), ("B, 1,000 conversations", large)):
        print(f"    {who:31} {seconds * 1000:7.2f} ms  {size / 1024:6.1f} KB, {gzipped / 1024:5.1f} KB gzipped")
    print(f"    ratio: {large[0] / small[0]:.2f}x the time, {large[1] / small[1]:.2f}x the bytes")


def main():
    users = get_user_model().objects
    small, large, other = (users.create(username=f"bench-pages-{name}") for name in "abc")
    try:
        _conversations(small, 10, matching_every=2)
        _conversations(large, 1000, matching_every=2)
        _analyze()
        alone = _timed(_client(small), f"{reverse('conversation-search')}?q={SEARCHED}", **HTMX)
        _noise(other, messages=40_000)
        _analyze()
        # A's list has one page; B's "Load more" is asked for its 11th.
        before = ""
        for _ in range(10):
            before = selectors.conversation_list(user=large, before=before).next_cursor
        results = {"small": _measure(small, before=""), "large": _measure(large, before=before)}
    finally:
        # A server database is left as it was.
        users.filter(pk__in=[small.pk, large.pk, other.pk]).delete()

    print(
        f"pages for a user with 10 conversations and one with 1,000, median of {REQUESTS} ({settings.DATABASES['default']['ENGINE']}):"
    )
    for label in results["small"]:
        _report(label, results["small"][label], results["large"][label])
    with_noise = results["small"][f"search “{SEARCHED}”"][0]
    print(
        f"  A's search before and after user C's 40,000 matching messages: {alone[0] * 1000:.2f} ms, {with_noise * 1000:.2f} ms ({with_noise / alone[0]:.2f}x)"
    )
