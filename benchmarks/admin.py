"""The administrator's pages and cleanup at real size: a run's trace page for
a short run (baseline, 20 events) and a long one (2,000 events beside 10,000
streamed-text rows), and the cleanup dry run over 10 conversations (baseline)
and 1,000, each with five run artifacts of two versions."""

import statistics
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import Run, RunEvent
from agents.selectors import conversations_busy
from artifacts.cleanup import cleanup_plan
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from conversations.models import Conversation, Message

REPEATS = 10
RESULT = "<page>" + "A heat pump moves heat rather than making it. " * 40 + "</page>"


def _run(owner, *, steps: int, chunks: int) -> Run:
    conversation = Conversation.objects.create(owner=owner, title="Traced")
    ArtifactSession.objects.create(conversation=conversation)
    run = Run.objects.create(
        message=Message.objects.create(conversation=conversation, content="Q?"), status=Run.Status.COMPLETED
    )
    events, seq = [], 0
    for n in range(steps):
        for type, data in (
            (
                RunEvent.Type.LLM_COMPLETE,
                {"content": "call", "token_usage": {"prompt_tokens": 900, "completion_tokens": 40}, "duration_ms": 800},
            ),
            (RunEvent.Type.TOOL_START, {"tool": "web_fetch", "params": {"url": f"https://example.com/{n}"}}),
            (RunEvent.Type.TOOL_COMPLETE, {"tool": "web_fetch", "success": True, "result": RESULT, "duration_ms": 300}),
            (RunEvent.Type.AGENT_COMPLETE, {"response": "Done."}),
        ):
            seq += 1
            events.append(RunEvent(run=run, seq=seq, type=type, agent="crawl_agent", data=data))
    for _ in range(chunks):
        seq += 1
        events.append(
            RunEvent(run=run, seq=seq, type=RunEvent.Type.LLM_CHUNK, agent="lead_agent", data={"content": "tokens "})
        )
    RunEvent.objects.bulk_create(events, batch_size=2000)
    return run


def _conversations(owner, count: int) -> list:
    conversations = Conversation.objects.bulk_create(Conversation(owner=owner, title=f"Old {i}") for i in range(count))
    ArtifactSession.objects.bulk_create(ArtifactSession(conversation=c) for c in conversations)
    artifacts = Artifact.objects.bulk_create(
        (
            Artifact(
                session_id=c.pk,
                artifact_id=f"web_fetch_result_{n}",
                content=RESULT,
                content_type="text/xml",
                source=Artifact.Source.RUN,
            )
            for c in conversations
            for n in range(1, 6)
        ),
        batch_size=2000,
    )
    ArtifactVersion.objects.bulk_create(
        (
            ArtifactVersion(artifact=a, version=v, content=RESULT, update_type="create")
            for a in artifacts
            for v in (1, 2)
        ),
        batch_size=2000,
    )
    return [c.pk for c in conversations]


def _median(action) -> tuple[float, int]:
    times = []
    for _ in range(REPEATS):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
    return statistics.median(times), len(queries)


def main():
    users = get_user_model().objects
    staff = users.create(username="bench-admin-staff", is_staff=True, is_superuser=True)
    owner = users.create(username="bench-admin-owner")
    try:
        client = Client(HTTP_HOST="localhost")
        client.force_login(staff)
        short, long = _run(owner, steps=5, chunks=0), _run(owner, steps=500, chunks=10_000)
        trace = {}
        for label, run in (("20 events (baseline)", short), ("2,000 events + 10,000 chunks", long)):
            url = reverse("admin:agents_run_change", args=[run.pk])
            assert client.get(url).status_code == 200
            trace[label] = _median(lambda url=url: client.get(url))
        few, many = _conversations(owner, 10), _conversations(owner, 1000)
        plan = {}
        for label, ids in (("10 conversations (baseline)", few), ("1,000 conversations, 5,000 artifacts", many)):
            plan[label] = _median(lambda ids=ids: cleanup_plan(busy=conversations_busy(), conversation_ids=ids))
    finally:
        # A server database is left as it was.
        users.filter(pk__in=[staff.pk, owner.pk]).delete()

    print(f"admin, median of {REPEATS} ({settings.DATABASES['default']['ENGINE']}):")
    for title, results in (("trace page of a run", trace), ("cleanup dry run", plan)):
        (base_label, (base, _)), *rest = results.items()
        print(f"  {title}: {base_label} {base * 1000:.1f} ms, {results[base_label][1]} queries")
        for label, (seconds, queries) in rest:
            print(f"  {title}: {label} {seconds * 1000:.1f} ms ({seconds / base:.2f}x), {queries} queries")
