"""The conversation page a team lives in: a thread of 100 turns against one
of 10 (the baseline), each answer about 5,000 characters, with a plan and a
report in the pane; and the same 10-turn page while its last turn is running
with 30 steps shown live. Median of REQUESTS requests each, plain and gzipped."""

import statistics
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from agents.models import Run, RunEvent
from conversations.models import Conversation
from tests.e2e.seed import long_conversation

REQUESTS = 20
PARAGRAPH = "Air-source heat pumps keep a useful coefficient of performance well below freezing. " * 12
ANSWER = "\n\n".join(f"## Part {n}\n\n{PARAGRAPH}\n\n- a point\n- another point" for n in range(5))


def _thread(user, *, turns: int) -> Conversation:
    return Conversation.objects.get(pk=long_conversation(username=user.username, turns=turns, answer=ANSWER))


def _running(conversation, *, steps: int) -> None:
    """The last turn running, its lead having handed `steps` searches to the search agent."""
    run = Run.objects.filter(message=conversation.active_branch).get()
    run.status = Run.Status.RUNNING
    run.save(update_fields=["status"])
    events = [RunEvent(run=run, seq=1, type=RunEvent.Type.METADATA, data={"model": "bench"})]
    events.append(
        RunEvent(run=run, seq=2, type=RunEvent.Type.AGENT_START, agent="lead_agent", data={"instruction": "?"})
    )
    for n in range(steps):
        seq = 3 + 2 * n
        events.append(
            RunEvent(
                run=run,
                seq=seq,
                type=RunEvent.Type.TOOL_START,
                agent="search_agent",
                data={"tool": "web_search", "params": {"query": f"heat pumps {n}"}},
            )
        )
        result = (
            "<search_results>"
            + "".join(
                f"<result><title>Doc {n}.{k}</title><url>library://{k}</url><snippet>{PARAGRAPH[:200]}</snippet></result>"
                for k in range(4)
            )
            + "</search_results>"
        )
        events.append(
            RunEvent(
                run=run,
                seq=seq + 1,
                type=RunEvent.Type.TOOL_COMPLETE,
                agent="search_agent",
                data={"tool": "web_search", "success": True, "result": result, "duration_ms": 120},
            )
        )
    RunEvent.objects.bulk_create(events)


def _timed(client: Client, url: str) -> tuple[float, int, int]:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    timings = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        client.get(url)
        timings.append(time.perf_counter() - started)
    gzipped = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    return statistics.median(timings), len(response.content), len(gzipped.content)


def main():
    user = get_user_model().objects.create(username="bench-thread-page")
    try:
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        short, long = _thread(user, turns=10), _thread(user, turns=100)
        results = {"10 turns (baseline)": _timed(client, short.get_absolute_url())}
        results["100 turns"] = _timed(client, long.get_absolute_url())
        _running(short, steps=30)
        results["10 turns, last running with 30 live steps"] = _timed(client, short.get_absolute_url())
    finally:
        # A server database is left as it was.
        user.delete()

    base = results["10 turns (baseline)"]
    print(
        f"conversation page, answers of {len(ANSWER):,} characters, median of {REQUESTS} ({settings.DATABASES['default']['ENGINE']}):"
    )
    for label, (seconds, size, gzipped) in results.items():
        print(
            f"  {label:44} {seconds * 1000:7.2f} ms  {size / 1024:7.1f} KB, {gzipped / 1024:5.1f} KB gzipped"
            f"  ({seconds / base[0]:.2f}x the time, {size / base[1]:.2f}x the bytes)"
        )
