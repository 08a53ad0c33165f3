"""The conversation page a team lives in: a thread of 100 turns against one
of 10 (the baseline), each answer about 5,000 characters, with a plan and a
report in the pane; and the same 10-turn page while its last turn is running
with 30 steps shown live. Median of REQUESTS requests each, plain and gzipped.

Then a long thread's pages (issue 31, item 5), for 40 and 200 turns: the
first response's size, its DOM (elements and text nodes) and time, before (every
turn, as the page was: THREAD_PAGE_TURNS above any thread's length) against
after (the newest THREAD_PAGE_TURNS); and what a question sent answers with,
before (the whole thread again) against after (the new turn alone).

Runs on its own (`python benchmarks/thread_page.py`) or from benchmarks/run.py.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import statistics
import time
from html.parser import HTMLParser

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory, override_settings
from django_htmx.middleware import HtmxDetails

from agents.models import Run, RunEvent
from conversations import lifecycle, views
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
    print()
    long_threads()


# Every turn, as the page was before it came in pages.
ALL_TURNS = 10**6


class _DomCount(HTMLParser):
    """Elements and non-blank text nodes, about what the browser's DOM holds."""

    def __init__(self):
        super().__init__()
        self.nodes = 0

    def handle_starttag(self, tag, attrs):
        self.nodes += 1

    def handle_data(self, data):
        self.nodes += bool(data.strip())


def _dom_nodes(html: str) -> int:
    counter = _DomCount()
    counter.feed(html)
    return counter.nodes


def _first_page(client: Client, url: str) -> tuple[float, int, int]:
    html = client.get(url).content
    timings = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        client.get(url)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings), len(html), _dom_nodes(html.decode())


def _send(user, conversation) -> tuple[float, int]:
    """What a question sent answers with: before, the thread again (views.thread_response
    as the send answered); after, the turn alone (views.turn_response). The question
    is stored each time and its run marked finished, so the next may be sent."""
    factory = RequestFactory(HTTP_HOST="localhost", HTTP_HX_REQUEST="true")
    timings, size = [], 0
    for _ in range(REQUESTS):
        request = factory.post(conversation.get_absolute_url())
        request.user, request.htmx = user, HtmxDetails(request)
        message = lifecycle.message_post(conversation=conversation, content="And then?", enqueue=False)
        started = time.perf_counter()
        if settings.THREAD_PAGE_TURNS == ALL_TURNS:
            response = views.thread_response(request, conversation=conversation, posted=True)
        else:
            response = views.turn_response(request, conversation=conversation, message=message)
        timings.append(time.perf_counter() - started)
        size = len(response.content)
        Run.objects.filter(message=message).update(status=Run.Status.COMPLETED)
    return statistics.median(timings), size


def long_threads():
    user = get_user_model().objects.create(username="bench-long-thread")
    results = {}
    try:
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        for turns in (40, 200):
            conversation = _thread(user, turns=turns)
            modes = (("before", ALL_TURNS), ("after", settings.THREAD_PAGE_TURNS))
            pages = {}
            for label, page_turns in modes:
                with override_settings(THREAD_PAGE_TURNS=page_turns):
                    pages[label] = _first_page(client, conversation.get_absolute_url())
            # Sending adds turns: the pages are measured first.
            for label, page_turns in modes:
                with override_settings(THREAD_PAGE_TURNS=page_turns):
                    results[turns, label] = (pages[label], _send(user, conversation))
    finally:
        user.delete()

    print(
        f"long thread, first page and a send, answers of {len(ANSWER):,} characters, "
        f"{settings.THREAD_PAGE_TURNS} turns a page, median of {REQUESTS} ({settings.DATABASES['default']['ENGINE']}):"
    )
    for turns in (40, 200):
        for label in ("before", "after"):
            (seconds, size, nodes), (send_seconds, send_size) = results[turns, label]
            print(
                f"  {turns:3} turns {label:6}  page {size / 1024:7.1f} KB {nodes:7,} DOM nodes {seconds * 1000:7.1f} ms"
                f"   send answers {send_size / 1024:7.1f} KB in {send_seconds * 1000:6.1f} ms"
            )
        (before_page, before_send), (after_page, after_send) = results[turns, "before"], results[turns, "after"]
        print(
            f"  {turns:3} turns after/before: page {after_page[1] / before_page[1]:.3f}x the bytes, "
            f"{after_page[2] / before_page[2]:.3f}x the DOM, {after_page[0] / before_page[0]:.3f}x the time; "
            f"send {after_send[1] / before_send[1]:.3f}x the bytes, {after_send[0] / before_send[0]:.3f}x the time"
        )
    (after_40, _), (after_200, _) = results[40, "after"], results[200, "after"]
    print(
        f"  after, 200 turns against 40: {after_200[1] / after_40[1]:.3f}x the bytes, "
        f"{after_200[2] / after_40[2]:.3f}x the DOM, {after_200[0] / after_40[0]:.2f}x the time"
    )


if __name__ == "__main__":
    main()
