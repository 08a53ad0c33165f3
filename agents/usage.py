"""What the team's model calls used and what they cost, for the usage page:
by person, group, model, kind (an agent's steps, compaction, titles) and
period, with each person's budget beside their use.

Everything is added up from the daily rollup (TokenUse), never from the runs,
in two grouped queries whatever the period: one by person, model and kind,
which every table but the periods' is folded from, and one by period and
model. Costs are estimates at the models file's prices as they are now
(agents.llm.config.Price); a model without a price costs nothing known, and
the page says which.
"""

import datetime
from collections import defaultdict
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .budgets import budget_notice_text, budget_of, budgets_of, spent_today, tokens_today
from .llm.config import Price, prices_from_settings
from .models import TokenUse

DAY, WEEK, MONTH = "day", "week", "month"
# Days a table by day may cover: a year by day would be a page of 365 rows.
DAYS_BY_DAY = 93
MILLION = 1_000_000
# What each kind of call is called on the page; another kind is shown by its name.
KIND_LABELS = {
    "lead_agent": _("Lead agent"),
    "search_agent": _("Search agent"),
    "crawl_agent": _("Crawl agent"),
    "compaction": _("Context summaries"),
    "title": _("Titles"),
}
FIGURES = ("calls", "estimated_calls", "input_tokens", "cached_tokens", "output_tokens")


@dataclass
class UsageRow:
    """One line of a table: its key (a person's or group's id, a model's or
    kind's name, a period's first day) and what was used under it."""

    key: object
    label: str = ""
    calls: int = 0
    estimated_calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    # In the file's currency; None while none of its models has a price.
    cost: float | None = None
    # People only: their daily budget (0: unlimited) and what they spent today.
    budget: int | None = None
    today: int | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.cached_tokens + self.output_tokens

    @property
    def budget_share(self) -> int | None:
        """Today's spending as a percentage of the budget; None without one."""
        return None if not self.budget else round(100 * (self.today or 0) / self.budget)

    def add(self, figures: dict, *, price: Price | None) -> None:
        for name in FIGURES:
            setattr(self, name, getattr(self, name) + (figures[name] or 0))
        if price is not None:
            cost = (
                (figures["input_tokens"] or 0) * price.input
                + (figures["cached_tokens"] or 0) * price.cached
                + (figures["output_tokens"] or 0) * price.output
            ) / MILLION
            self.cost = (self.cost or 0) + cost


@dataclass
class UsageFilter:
    start: datetime.date
    end: datetime.date
    grain: str = DAY
    person_id: int | None = None
    group_id: int | None = None
    model: str = ""
    kind: str = ""


@dataclass
class UsageReport:
    filter: UsageFilter
    total: UsageRow
    periods: list[UsageRow] = field(default_factory=list)
    people: list[UsageRow] = field(default_factory=list)
    groups: list[UsageRow] = field(default_factory=list)
    models: list[UsageRow] = field(default_factory=list)
    kinds: list[UsageRow] = field(default_factory=list)
    currency: str = ""
    # Models used in the period that the models file gives no price.
    unpriced: list[str] = field(default_factory=list)


def usage_sees_everyone(*, user) -> bool:
    """Whether the usage page shows this user everyone's figures: superusers,
    and staff given the permission to view token use."""
    return user.is_active and user.is_staff and user.has_perm("agents.view_tokenuse")


def usage_report(*, usage_filter: UsageFilter) -> UsageReport:
    prices, currency = prices_from_settings()
    uses = _uses(usage_filter)
    sums = {name: Sum(name) for name in FIGURES}
    total = UsageRow(key="total")
    people, models, kinds = {}, {}, {}
    by_user = defaultdict(list)
    for figures in uses.values("user_id", "model", "kind").annotate(**sums).order_by():
        price = prices.get(figures["model"])
        total.add(figures, price=price)
        for rows, key in ((people, figures["user_id"]), (models, figures["model"]), (kinds, figures["kind"])):
            rows.setdefault(key, UsageRow(key=key, label=str(key))).add(figures, price=price)
        by_user[figures["user_id"]].append((figures, price))
    report = UsageReport(filter=usage_filter, total=total, currency=currency)
    report.unpriced = sorted(name for name in models if name not in prices)
    report.people = _people(people)
    report.groups = _groups(by_user, group_id=usage_filter.group_id)
    report.models = _sorted(models)
    for row in kinds.values():
        row.label = str(KIND_LABELS.get(row.key, row.key))
    report.kinds = _sorted(kinds)
    report.periods = _periods(uses, grain=usage_filter.grain, prices=prices)
    return report


def usage_models() -> list[str]:
    """Every model anyone's calls used, for the page's filter."""
    return list(TokenUse.objects.order_by("model").values_list("model", flat=True).distinct())


def usage_summary(*, user) -> dict:
    """A person's own figures for their Settings: today's spending against
    their budget, with the page's notice, and this month's tokens."""
    today = timezone.localdate()
    month = TokenUse.objects.filter(user=user, day__gte=today.replace(day=1), day__lte=today).aggregate(
        **{name: Sum(name) for name in ("input_tokens", "cached_tokens", "output_tokens")}
    )
    budget, used = budget_of(user=user), tokens_today(user_id=user.pk)
    return {
        "tokens_today": used,
        "daily_budget": budget,
        "budget_notice": budget_notice_text(budget=budget, used=used),
        "month_tokens": sum(value or 0 for value in month.values()),
    }


def usage_csv_rows(report: UsageReport):
    """The report's tables as CSV rows, the header first: what the page shows, line by line."""
    yield [
        "table",
        "key",
        "name",
        "calls",
        "calls estimated",
        "input tokens",
        "cached input tokens",
        "output tokens",
        "tokens",
        f"estimated cost ({report.currency})" if report.currency else "estimated cost",
        "daily budget",
        "spent today",
    ]
    tables = (
        ("total", [report.total]),
        (report.filter.grain, report.periods),
        ("person", report.people),
        ("group", report.groups),
        ("model", report.models),
        ("kind", report.kinds),
    )
    for table, rows in tables:
        for row in rows:
            yield [
                table,
                row.key.isoformat() if isinstance(row.key, datetime.date) else row.key,
                row.label,
                row.calls,
                row.estimated_calls,
                row.input_tokens,
                row.cached_tokens,
                row.output_tokens,
                row.tokens,
                "" if row.cost is None else f"{row.cost:.4f}",
                "" if row.budget is None else row.budget,
                "" if row.today is None else row.today,
            ]


def _uses(usage_filter: UsageFilter):
    uses = TokenUse.objects.filter(day__gte=usage_filter.start, day__lte=usage_filter.end)
    if usage_filter.person_id is not None:
        uses = uses.filter(user_id=usage_filter.person_id)
    if usage_filter.group_id is not None:
        uses = uses.filter(user__groups=usage_filter.group_id)
    if usage_filter.model:
        uses = uses.filter(model=usage_filter.model)
    if usage_filter.kind:
        uses = uses.filter(kind=usage_filter.kind)
    return uses


def _sorted(rows: dict) -> list[UsageRow]:
    return sorted(rows.values(), key=lambda row: (-row.tokens, row.label))


def _people(rows: dict[int, UsageRow]) -> list[UsageRow]:
    names = dict(get_user_model().objects.filter(pk__in=rows).values_list("pk", get_user_model().USERNAME_FIELD))
    budgets, today = budgets_of(user_ids=list(rows)), spent_today(user_ids=list(rows))
    for user_id, row in rows.items():
        row.label = names.get(user_id, str(user_id))
        row.budget, row.today = budgets[user_id], today.get(user_id, 0)
    return _sorted(rows)


def _groups(by_user: dict[int, list], *, group_id: int | None) -> list[UsageRow]:
    """By group, each person's use under every group they are in now: a
    person in two groups counts in both, and the groups add up to more than
    the total."""
    memberships = Group.objects.filter(user__in=by_user).values_list("pk", "name", "user")
    if group_id is not None:
        memberships = memberships.filter(pk=group_id)
    rows = {}
    for pk, name, user_id in memberships:
        row = rows.setdefault(pk, UsageRow(key=pk, label=name))
        for figures, price in by_user[user_id]:
            row.add(figures, price=price)
    return _sorted(rows)


def _periods(uses, *, grain: str, prices: dict[str, Price]) -> list[UsageRow]:
    """By day, week (from Monday) or month. Added up by day in the database
    and into weeks and months here: a day is at most a few rows per model, and
    SQLite would truncate every row's date in Python."""
    rows = {}
    for figures in uses.values("day", "model").annotate(**{name: Sum(name) for name in FIGURES}).order_by():
        day = figures["day"]
        key = {DAY: day, WEEK: day - datetime.timedelta(days=day.weekday()), MONTH: day.replace(day=1)}[grain]
        rows.setdefault(key, UsageRow(key=key, label=key.isoformat())).add(figures, price=prices.get(figures["model"]))
    return [rows[key] for key in sorted(rows)]
