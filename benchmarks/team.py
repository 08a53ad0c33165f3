"""A team's shared work (issue 32): continuing someone's thread in a
conversation of one's own (`conversation_fork`) at 40 and 200 turns of about
5,000-character answers, each with a plan and a two-version report, against a
10-turn thread (the baseline). Median of REPEATS forks each, with the queries
each fork costs.

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

from agents.services.forking import conversation_fork
from conversations.models import Conversation
from tests.e2e.seed import long_conversation

REPEATS = 5
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


def main():
    User = get_user_model()
    owner, _ = User.objects.get_or_create(username="bench-team-owner")
    viewer, _ = User.objects.get_or_create(username="bench-team-viewer")
    print("Forking a thread into one's own conversation (median of", REPEATS, "forks)")
    baseline = None
    for turns in (10, 40, 200):
        conversation = Conversation.objects.get(
            pk=long_conversation(username=owner.username, turns=turns, answer=ANSWER)
        )
        seconds, queries = _fork_timed(conversation, user=viewer)
        baseline = baseline or seconds
        print(
            f"  {turns:>3} turns: {seconds * 1000:7.1f} ms, {queries:>4} queries,"
            f" {seconds / baseline:5.1f}× the 10-turn fork"
        )


if __name__ == "__main__":
    main()
