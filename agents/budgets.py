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
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from artifactflow.db import transient_retry

from .models import TokenBudget, TokenSpend
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
    own = TokenBudget.objects.filter(user=user).values_list("daily_tokens", flat=True).first()
    if own is not None:
        return own
    groups = list(TokenBudget.objects.filter(group__user=user).values_list("daily_tokens", flat=True))
    if groups:
        return 0 if 0 in groups else max(groups)
    return settings.DAILY_TOKEN_BUDGET


def tokens_today(*, user_id: int) -> int:
    """The tokens the user's model calls spent since local midnight, with the
    estimates of the calls under way."""
    spent = TokenSpend.objects.filter(user_id=user_id, day=timezone.localdate()).values_list("tokens", flat=True)
    return spent.first() or 0


def budget_refusal(*, user) -> str:
    """Why the user may not start a turn now (today's budget is spent), or ""."""
    budget = budget_of(user=user)
    if not budget:
        return ""
    used = tokens_today(user_id=user.pk)
    if used < budget:
        return ""
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


def spend_settle(*, reservation: Reservation, usage: dict | None, reply: str) -> None:
    """After the call: what it cost takes the reservation's place, on the day
    it was reserved. The cost is the service's count (`usage`), or when it
    reported none (or nonsense) the estimates of the request and of the `reply`. Retried
    while the database is away; repeated after a commit reported lost, it
    counts the call twice: too much, never too little."""
    believed = usage_believed(usage)
    cost = believed["total_tokens"] if believed else reservation.estimate + tokens_estimate(text=reply)
    change = cost - reservation.tokens
    if not change:
        return

    def write():
        spend = _spend_row(user_id=reservation.user_id, day=reservation.day)
        TokenSpend.objects.filter(pk=spend.pk).update(tokens=F("tokens") + change)

    transient_retry(write, what=f"the tokens {reservation.user_id} spent")


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
