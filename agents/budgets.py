"""Daily token budgets: what a person may spend on model calls in a day, and
what they have spent.

Spending is counted per model call, in a ledger of one row per person and
local day (TokenSpend). Before a call, while a budget applies, its estimate is
reserved under a lock on that row, and the call is refused once the day's
spending, reservations of calls still under way included, has reached the
budget; after it, the reservation is replaced by what the service reported.
So turns running side by side see each other's calls as they start, and only
the calls already under way when the budget is reached can pass it, by what
they cost beyond their estimate: with one call at a time, at most that call.

The budget is read afresh for every call: a budget the admin lowers, or a
group the person leaves, applies from their next call on, in turns already
running too.
"""

from dataclasses import dataclass
from datetime import date

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from artifactflow.db import transient_retry

from .models import TokenBudget, TokenSpend, TokenUse
from .tokens import tokens_estimate

# Stored in English on the run and translated as a page shows it (agents.projection.stored_text).
BUDGET_SPENT = gettext_noop(
    "Today's token budget is spent, so this turn stopped before its next model call. "
    "What it wrote so far is kept; the budget renews at midnight."
)
# What a call is reserved for beyond its request's estimate: about a step's
# reply. What an answer costs past it is what a call under way may pass the budget by.
RESERVED_REPLY_TOKENS = 1_000
# More than any model's context and reply: a call reported to cost more is not believed.
MAX_CALL_TOKENS = 100_000_000
# The share of the day's budget from which the page says how much is used.
BUDGET_NOTICE_SHARE = 0.8


class BudgetSpent(Exception):
    """The user's budget for today is spent: the model call is not made."""

    def __init__(self):
        super().__init__(BUDGET_SPENT)


@dataclass(frozen=True)
class Reservation:
    user_id: int
    day: date
    # The request's estimated tokens, and what was reserved for the call (0 without a budget).
    estimate: int
    tokens: int


def budget_of(*, user) -> int:
    """The user's daily token budget (0: unlimited): their own, else the most
    generous of their groups', else DAILY_TOKEN_BUDGET."""
    return budgets_of(user_ids=[user.pk])[user.pk]


def budgets_of(*, user_ids: list[int]) -> dict[int, int]:
    """budget_of for each of these users, in one query however many."""
    own, groups = {}, {}
    rows = TokenBudget.objects.filter(Q(user_id__in=user_ids) | Q(group__user__in=user_ids))
    for user_id, member_id, tokens in rows.values_list("user_id", "group__user", "daily_tokens"):
        if user_id is not None:
            own[user_id] = tokens
        else:
            groups.setdefault(member_id, []).append(tokens)
    budgets = {}
    for user_id in user_ids:
        if user_id in own:
            budgets[user_id] = own[user_id]
        elif user_id in groups:
            budgets[user_id] = 0 if 0 in groups[user_id] else max(groups[user_id])
        else:
            budgets[user_id] = settings.DAILY_TOKEN_BUDGET
    return budgets


def tokens_today(*, user_id: int) -> int:
    """The tokens the user's model calls spent since local midnight, with the
    estimates of the calls under way."""
    return spent_today(user_ids=[user_id]).get(user_id, 0)


def spent_today(*, user_ids: list[int]) -> dict[int, int]:
    """tokens_today for each of these users that spent any, in one query."""
    spends = TokenSpend.objects.filter(user_id__in=user_ids, day=timezone.localdate())
    return dict(spends.values_list("user_id", "tokens"))


def budget_refusal(*, user) -> str:
    """Why the user may not start a turn now (today's budget is spent), or ""."""
    budget = budget_of(user=user)
    used = tokens_today(user_id=user.pk) if budget else 0
    return _spent_text(budget=budget, used=used) if budget and used >= budget else ""


def budget_notice(*, user) -> str:
    """What the page tells a person who has used BUDGET_NOTICE_SHARE of
    today's budget or more, or ""."""
    budget = budget_of(user=user)
    return budget_notice_text(budget=budget, used=tokens_today(user_id=user.pk) if budget else 0)


def budget_notice_text(*, budget: int, used: int) -> str:
    """budget_notice for a budget and a day's spending already read."""
    if not budget or used < budget * BUDGET_NOTICE_SHARE:
        return ""
    if used >= budget:
        return _spent_text(budget=budget, used=used)
    return gettext(
        "You have used %(share)s%% of today's token budget: %(used)s of %(budget)s tokens. It renews at midnight."
    ) % {"share": used * 100 // budget, "used": f"{used:,}", "budget": f"{budget:,}"}


def _spent_text(*, budget: int, used: int) -> str:
    return gettext("You have used today's token budget: %(used)s of %(budget)s tokens. It renews at midnight.") % {
        "used": f"{used:,}",
        "budget": f"{budget:,}",
    }


def spend_reserve(*, user, estimate: int) -> Reservation:
    """Before a model call of about `estimate` tokens: reserve them and a
    reply's, or raise BudgetSpent when today's spending has reached the
    user's budget. Without a budget nothing is reserved (the call is
    counted when it is settled)."""
    day = timezone.localdate()
    budget = budget_of(user=user)
    if not budget:
        return Reservation(user_id=user.pk, day=day, estimate=estimate, tokens=0)
    tokens = estimate + RESERVED_REPLY_TOKENS
    with transaction.atomic():
        spend = _spend_row(user_id=user.pk, day=day)
        # Locked until the reservation commits: another turn's call waits here
        # and then sees this one's (on SQLite the transaction's write lock does it).
        spent = TokenSpend.objects.select_for_update().filter(pk=spend.pk).values_list("tokens", flat=True).get()
        if spent >= budget:
            raise BudgetSpent
        TokenSpend.objects.filter(pk=spend.pk).update(tokens=F("tokens") + tokens)
    return Reservation(user_id=user.pk, day=day, estimate=estimate, tokens=tokens)


def spend_settle(*, reservation: Reservation, usage: dict | None, reply: str, model: str, kind: str) -> None:
    """After the call: what it cost takes the reservation's place, on the day
    it was reserved, and is added to the day's use of `model` by `kind` (an
    agent's steps, compaction or title: TokenUse). The cost is the service's
    count (`usage`), or when it reported none (or nonsense) the estimates of
    the request and of the `reply`. Retried while the database is away;
    repeated after a commit reported lost, it counts the call twice: too
    much, never too little."""
    believed = usage_believed(usage)
    if believed:
        prompt, output = believed.get("prompt_tokens"), believed.get("completion_tokens")
        if type(prompt) is not int or type(output) is not int or prompt < 0 or output < 0:
            prompt, output = believed["total_tokens"], 0
        cached = min(_cached_tokens(believed), prompt)
        cost = believed["total_tokens"]
    else:
        prompt, cached, output = reservation.estimate, 0, tokens_estimate(text=reply)
        cost = prompt + output
    change = cost - reservation.tokens
    use = {"day": reservation.day, "user_id": reservation.user_id, "model": model[:200], "kind": kind}
    counts = {
        "calls": 1,
        "estimated_calls": 0 if believed else 1,
        "input_tokens": prompt - cached,
        "cached_tokens": cached,
        "output_tokens": output,
    }

    def write():
        with transaction.atomic():
            if change > 0:
                _counts_add(
                    TokenSpend, keys={"user_id": reservation.user_id, "day": reservation.day}, counts={"tokens": change}
                )
            elif change:
                # Less than reserved: the reservation made the row.
                TokenSpend.objects.filter(user_id=reservation.user_id, day=reservation.day).update(
                    tokens=F("tokens") + change
                )
            _counts_add(TokenUse, keys=use, counts=counts)

    transient_retry(write, what=f"the tokens {reservation.user_id} spent")


def _counts_add(model, *, keys: dict, counts: dict) -> None:
    """Add `counts` to the row of `model` with these unique `keys`, made if
    there is none yet, in one statement (INSERT … ON CONFLICT DO UPDATE, on
    SQLite and Postgres alike): a model call writes its figures without
    reading first, and two calls at once never both make the row."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    fields = {name: model._meta.get_field(name).column for name in (*keys, *counts)}
    columns = ", ".join(quote(fields[name]) for name in (*keys, *counts))
    placeholders = ", ".join(["%s"] * (len(keys) + len(counts)))
    conflict = ", ".join(quote(fields[name]) for name in keys)
    added = ", ".join(
        f"{quote(fields[name])} = {table}.{quote(fields[name])} + excluded.{quote(fields[name])}" for name in counts
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) ON CONFLICT ({conflict}) DO UPDATE SET {added}",
            [*keys.values(), *counts.values()],
        )


def _cached_tokens(usage: dict) -> int:
    """The prompt's tokens the service read from its cache, as the engine
    keeps them (cached_tokens) or as OpenAI reports them."""
    cached = usage.get("cached_tokens")
    if cached is None:
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return cached if type(cached) is int and cached > 0 else 0


def usage_believed(usage: dict | None) -> dict | None:
    """A call's usage if its total is a count of tokens. A service's figures
    come unchecked: one that is no count (negative, past any model's) is not
    believed, nor let overflow the ledger or the metrics."""
    reported = (usage or {}).get("total_tokens")
    return usage if type(reported) is int and 0 < reported <= MAX_CALL_TOKENS else None


def metrics_tokens(metrics: dict | None) -> int:
    """The tokens a run's model calls cost, as its metrics record them."""
    executions = (metrics or {}).get("agent_executions") or []
    return sum(((record.get("token_usage") or {}).get("total_tokens") or 0) for record in executions)


def _spend_row(*, user_id: int, day: date) -> TokenSpend:
    return TokenSpend.objects.get_or_create(user_id=user_id, day=day)[0]
