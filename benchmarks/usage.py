"""The usage page over a year of a fifty-person team (issue 50: within 300 ms
over 250,000 runs).

A year's rollup as 250,000 runs leave it: fifty people in five groups, each
asking about 14 turns a day, every turn calling the lead (on one of two
models), the search and crawl agents, a title for every third and a context
summary for every tenth, so about 110,000 rows of TokenUse. The page, signed
in as a superuser, for this month by day, the year by month, the year for one
person and for one group by week, and the year's CSV: the median of
REQUESTS requests each, with its queries. Baseline, in the same run: this
month's page before any model call was made (the team, no rows).

    python benchmarks/usage.py        (also part of `make bench`)
"""

import datetime
import random
import statistics
import time

if __name__ == "__main__":
    from setup_django import setup

    setup()

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.models import TokenBudget, TokenUse

PEOPLE, GROUPS = 50, 5
RUNS_A_YEAR = 250_000
REQUESTS = 10


def _team():
    users = get_user_model().objects.bulk_create(
        get_user_model()(username=f"person-{n}" if n % 5 else f"研究员{n}") for n in range(PEOPLE)
    )
    groups = Group.objects.bulk_create(Group(name=f"group-{n}") for n in range(GROUPS))
    for n, user in enumerate(users):
        user.groups.add(groups[n % GROUPS], *([groups[(n + 1) % GROUPS]] if n % 4 == 0 else []))
    TokenBudget.objects.bulk_create(TokenBudget(group=group, daily_tokens=2_000_000) for group in groups)
    admin = get_user_model().objects.create_superuser("usage-admin", password="x")
    return users, groups, admin


def _year(users) -> int:
    """The rollup of RUNS_A_YEAR runs spread over the last 365 days."""
    rng = random.Random(50)
    today = timezone.localdate()
    runs_a_day = RUNS_A_YEAR / 365 / len(users)
    rows = []
    for user in users:
        for back in range(365):
            day = today - datetime.timedelta(days=back)
            runs = max(1, round(rng.gauss(runs_a_day, 4)))
            deep = rng.random() < 0.5
            calls = {
                ("deep-model" if deep else "fast-model", "lead_agent"): runs * 4,
                ("fast-model", "search_agent"): runs * 2,
                ("fast-model", "crawl_agent"): runs * 2,
                ("deep-model", "title"): max(1, runs // 3),
            }
            if runs >= 10:
                calls[("deep-model", "compaction")] = runs // 10
            for (model, kind), count in calls.items():
                rows.append(
                    TokenUse(
                        user=user,
                        day=day,
                        model=model,
                        kind=kind,
                        calls=count,
                        input_tokens=count * 6_000,
                        cached_tokens=count * 2_000,
                        output_tokens=count * 700,
                    )
                )
    TokenUse.objects.bulk_create(rows, batch_size=5_000)
    return len(rows)


def _measure(client, query: dict) -> tuple[float, int]:
    times = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(reverse("usage"), query)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    return statistics.median(times), len(queries)


def main() -> None:
    users, groups, admin = _team()
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    today = timezone.localdate()
    year_start = (today - datetime.timedelta(days=364)).isoformat()
    baseline, baseline_queries = _measure(client, {})
    started = time.perf_counter()
    rows = _year(users)
    print(
        f"The usage page over a year of {PEOPLE} people's {RUNS_A_YEAR:,} runs "
        f"({rows:,} rollup rows, written in {time.perf_counter() - started:.1f} s; "
        f"median of {REQUESTS} requests, on {connection.vendor}):"
    )
    print(f"  baseline: this month, no model calls yet: {baseline:.1f} ms, {baseline_queries} queries")
    cases = {
        "this month by day": {},
        "the year by month": {"start": year_start, "grain": "month"},
        "the year, one person, by week": {"start": year_start, "grain": "week", "person": users[7].pk},
        "the year, one group, by week": {"start": year_start, "grain": "week", "group": groups[2].pk},
        "the year as CSV": {"start": year_start, "grain": "month", "format": "csv"},
    }
    for name, query in cases.items():
        ms, queries = _measure(client, query)
        print(f"  {name}: {ms:.1f} ms ({ms / baseline:.1f}× baseline), {queries} queries")


if __name__ == "__main__":
    main()
