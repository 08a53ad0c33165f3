"""What a daily token budget holds, and what it costs a model call.

Eight questions asked at once by one person with a budget of 12,000 tokens,
each turn calling a tool for as long as it is let (at most 10 rounds), run by
the worker's own loop (run_start: three turns side by side, the rest admitted
as those end), against the scripted model over HTTP. Baseline, in the same
run: the budget checked only when a question is asked, as before issue 45
(the turns, once asked, never see it); now: every call reserved before it is
made and settled after (agents.budgets).

Then one model call's bookkeeping, 500 times: reserve and settle with a
budget, against settling alone (no budget), in ms and rows written.

    python benchmarks/budgets.py        (also part of `make bench`)
"""

import time

if __name__ == "__main__":
    from setup_django import setup

    setup()

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from agents.budgets import spend_reserve, spend_settle, tokens_today
from agents.services.execution import run_start
from conversations import lifecycle
from tests.model_server import ScriptedModelServer, Text

BUDGET = 12_000
QUESTIONS = 8
ROUNDS = 10
CALLS = 500
STEP = (
    "<tool_call>\n  <name>update_artifact</name>\n"
    "  <params><id>notes</id><old_str>x</old_str><new_str>y</new_str></params>\n</tool_call>"
)


def _asked_at_once(*, name: str, checked: bool) -> tuple[int, int]:
    """Tokens the eight turns spent, and the model calls they made."""
    server = ScriptedModelServer().start()
    server.add(*[Text(STEP, chunk_size=6, delay=0.005) for _ in range(QUESTIONS * (ROUNDS + 1))])
    settings.ARTIFACTFLOW_LLM = {
        "api_key": "sk-bench",
        "base_url": server.url,
        "model": server.model,
        "timeout": 60.0,
        "max_retries": 0,
    }
    settings.MAX_TOOL_ROUNDS = {**settings.MAX_TOOL_ROUNDS, "lead_agent": ROUNDS}
    settings.TURNS_PER_USER, settings.DAILY_TOKEN_BUDGET = 3, BUDGET
    user = get_user_model().objects.get_or_create(username=f"bench-budget-{name}")[0]
    runs = [
        lifecycle.conversation_start(user=user, content=f"第{n}个问题 question {n}").active_branch.runs.get()
        for n in range(QUESTIONS)
    ]
    if not checked:
        settings.DAILY_TOKEN_BUDGET = 0
    run_start(run_id=runs[0].pk)
    server.stop()
    settings.DAILY_TOKEN_BUDGET = BUDGET
    return tokens_today(user_id=user.pk), len(server.requests)


def _bookkeeping(*, name: str, budget: int) -> tuple[float, float]:
    """ms and rows written per model call."""
    settings.DAILY_TOKEN_BUDGET = budget
    user = get_user_model().objects.get_or_create(username=f"bench-budget-calls-{name}")[0]
    writes = []

    def count_writes(execute, sql, params, many, context):
        if sql.lstrip().split(" ", 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            writes.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count_writes):
        started = time.perf_counter()
        for _ in range(CALLS):
            spend_settle(
                reservation=spend_reserve(user=user, estimate=2_000),
                usage={"total_tokens": 2_100},
                reply="",
                model="m",
                kind="lead_agent",
            )
        elapsed = time.perf_counter() - started
    return elapsed / CALLS * 1000, len(writes) / CALLS


def main() -> None:
    print(
        f"{QUESTIONS} questions at once, a budget of {BUDGET:,} tokens, each turn calling a tool up to {ROUNDS} times:"
    )
    results = {}
    for name, checked in (("baseline", False), ("now", True)):
        spent, calls = results[name] = _asked_at_once(name=name, checked=checked)
        label = "checked when asked only (baseline)" if name == "baseline" else "checked before every call (now)"
        print(f"  {label:36} {spent:7,} tokens spent ({spent / BUDGET:.2f}x the budget), {calls:3} model calls")
    (base, base_calls), (now, now_calls) = results["baseline"], results["now"]
    print(f"  now / baseline: tokens {now / base:.2f}x, calls {now_calls / base_calls:.2f}x")

    unlimited = _bookkeeping(name="unlimited", budget=0)
    budgeted = _bookkeeping(name="budgeted", budget=10**12)
    print(f"one model call's bookkeeping, {CALLS} calls ({connection.vendor}):")
    print(f"  settle only, no budget (baseline): {unlimited[0]:6.2f} ms, {unlimited[1]:.1f} rows written a call")
    print(f"  reserve and settle, a budget:      {budgeted[0]:6.2f} ms, {budgeted[1]:.1f} rows written a call")
    print(f"  ratio: {budgeted[0] / unlimited[0]:.2f}x the time")


if __name__ == "__main__":
    main()
