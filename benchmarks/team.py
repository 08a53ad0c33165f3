"""A team's shared work (issue 32), on threads of 10 (the baseline), 40 and
200 turns of about 5,000-character answers with a plan and a two-version
report: continuing someone's thread in a conversation of one's own
(`conversation_fork`), and exporting it as Markdown, Word and a .zip. Median
of REPEATS each, with the queries a fork costs and each export's size.

Then "Shared with me", which every page's sidebar reads, in a portal of
SHARED_PORTAL conversations of which 10 are shared with the reader: read from
the shares (`conversations_shared_with`) against every conversation tested
with the read rule (`readable_filter`, the baseline).

Runs on its own (`python benchmarks/team.py`) or from benchmarks/run.py.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import statistics
import time

from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts import conversation_export
from conversations import selectors
from conversations.lifecycle import conversation_fork
from conversations.models import Conversation, ConversationShare
from tests.e2e.seed import long_conversation

REPEATS = 5
SHARED_PORTAL = 50_000
PARAGRAPH = "Air-source heat pumps keep a useful coefficient of performance well below freezing. " * 12
ANSWER = "\n\n".join(f"## Part {n}\n\n{PARAGRAPH}" for n in range(5))


def _fork_timed(conversation, *, user) -> tuple[float, int]:
    times = []
    for _ in range(REPEATS):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            conversation_fork(user=user, conversation=conversation, message=conversation.active_branch)
            times.append(time.perf_counter() - started)
    return statistics.median(times), len(queries)


def _exports_timed(conversation, *, user) -> dict[str, tuple[float, int]]:
    makers = {
        "md": lambda: conversation_export.conversation_markdown(conversation=conversation),
        "docx": lambda: conversation_export.conversation_docx(conversation=conversation, user=user),
        "zip": lambda: conversation_export.conversation_zip(conversation=conversation),
    }
    timed = {}
    for name, make in makers.items():
        times = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            export = make()
            times.append(time.perf_counter() - started)
        timed[name] = (statistics.median(times), len(export.data))
    return timed


def _median_ms(read) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _shared_with_me(*, reader, owners) -> None:
    Conversation.objects.bulk_create(
        (Conversation(owner=owners[n % len(owners)], title=f"c{n}") for n in range(SHARED_PORTAL)), batch_size=2000
    )
    for conversation in Conversation.objects.exclude(owner=reader).order_by("?")[:10]:
        ConversationShare.objects.create(conversation=conversation, user=reader)

    def scanned():
        found = Conversation.objects.exclude(owner=reader).filter(selectors.readable_filter(user=reader))
        return list(found.order_by("-updated_at", "-pk")[: selectors.PAGE_SIZE])

    assert {c.pk for c in scanned()} == {c.pk for c in selectors.conversations_shared_with(user=reader)}
    baseline = _median_ms(scanned)
    shared = _median_ms(lambda: selectors.conversations_shared_with(user=reader))
    print(f'"Shared with me" among {SHARED_PORTAL:,} conversations (median of {REPEATS})')
    print(f"  every conversation tested: {baseline:7.1f} ms (baseline)")
    print(f"  from the shares:           {shared:7.1f} ms, {baseline / shared:5.1f}× faster")


def main():
    User = get_user_model()
    owner, _ = User.objects.get_or_create(username="bench-team-owner")
    viewer, _ = User.objects.get_or_create(username="bench-team-viewer")
    print("Forking a thread into one's own conversation (median of", REPEATS, "forks)")
    threads = {
        turns: Conversation.objects.get(pk=long_conversation(username=owner.username, turns=turns, answer=ANSWER))
        for turns in (10, 40, 200)
    }
    baseline = None
    for turns, conversation in threads.items():
        seconds, queries = _fork_timed(conversation, user=viewer)
        baseline = baseline or seconds
        print(
            f"  {turns:>3} turns: {seconds * 1000:7.1f} ms, {queries:>4} queries,"
            f" {seconds / baseline:5.1f}× the 10-turn fork"
        )
    print("Exporting a thread (median of", REPEATS, "exports)")
    baselines = {}
    for turns, conversation in threads.items():
        for name, (seconds, size) in _exports_timed(conversation, user=owner).items():
            baselines.setdefault(name, seconds)
            print(
                f"  {turns:>3} turns, .{name:<4}: {seconds * 1000:7.1f} ms, {size / 1024:7.0f} KB,"
                f" {seconds / baselines[name]:5.1f}× the 10-turn export"
            )
    _shared_with_me(
        reader=viewer, owners=[owner, *[User.objects.get_or_create(username=f"bench-team-{n}")[0] for n in range(20)]]
    )


if __name__ == "__main__":
    main()
