"""The usage figures (agents.usage): what each model call adds to the daily
rollup, and the report the usage page draws from it."""

import datetime
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group
from django.db.models import Sum
from django.utils import timezone

from agents.models import TokenSpend, TokenUse
from agents.services.execution import run_execute
from agents.usage import MONTH, WEEK, UsageFilter, usage_csv_rows, usage_report
from conversations import lifecycle
from tests.agents.test_engine import call
from tests.conftest import LEAD_MODELS
from tests.factories import TokenSpendFactory, TokenUseFactory, UserFactory
from tests.model_server import Text

PRICES = """
currency = "EUR"

[prices."deep-model"]
input = 3.0
output = 15.0
cached = 0.3
"""

TODAY = datetime.date(2026, 11, 18)


@pytest.fixture
def priced_models(scripted_model, settings, tmp_path):
    """LEAD_MODELS with a price for the deep model alone, in euros."""
    path = tmp_path / "models.toml"
    path.write_text(PRICES + LEAD_MODELS)
    settings.MODELS_FILE = str(path)
    return path


def _turn(user, content):
    run = lifecycle.conversation_start(user=user, content=content, enqueue=False).active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _uses(user) -> dict:
    rows = TokenUse.objects.filter(user=user).values_list(
        "model", "kind", "calls", "estimated_calls", "input_tokens", "cached_tokens", "output_tokens"
    )
    return {(model, kind): tuple(figures) for model, kind, *figures in rows}


# --- recording --------------------------------------------------------------------------


def test_every_call_of_a_turn_is_added_up_by_model_and_kind_with_its_cached_tokens(
    user, priced_models, scripted_model, settings
):
    settings.MODEL_TITLES = True
    cached = {
        "prompt_tokens": 1_200,
        "completion_tokens": 30,
        "total_tokens": 1_230,
        "prompt_tokens_details": {"cached_tokens": 1_000},
    }
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="查找关于热泵的资料")),
        Text("找到三篇关于热泵的资料。", prompt_tokens=500),
        Text("热泵在寒冷地区也能工作。", usage_sent=cached),
        Text("寒冷地区的热泵"),
    )

    run = _turn(user, "热泵在寒冷地区能用吗？")

    uses = _uses(user)
    assert run.message.conversation.title == "寒冷地区的热泵"
    assert set(uses) == {("deep-model", "lead_agent"), ("fast-model", "search_agent"), ("deep-model", "title")}
    calls, estimated, input_tokens, cached_tokens, _ = uses[("deep-model", "lead_agent")]
    assert (calls, estimated, cached_tokens) == (2, 0, 1_000)
    # The second call's 200 uncached prompt tokens, and the first's whole prompt.
    first = run.metrics["agent_executions"][0]["token_usage"]["prompt_tokens"]
    assert input_tokens == first + 200
    assert uses[("fast-model", "search_agent")][:2] == (1, 0) and uses[("fast-model", "search_agent")][2] == 500
    # The ledger the budget reads and the rollup the page reads agree, title included.
    spent = TokenSpend.objects.get(user=user).tokens
    rolled = TokenUse.objects.filter(user=user).aggregate(
        total=Sum("input_tokens") + Sum("cached_tokens") + Sum("output_tokens")
    )["total"]
    assert spent == rolled == sum(r["token_usage"]["total_tokens"] for r in run.metrics["agent_executions"])


def test_a_call_whose_service_reports_no_usage_is_counted_at_its_estimate(user, scripted_model):
    scripted_model.add(Text("An answer without figures. " * 40, usage=False))

    _turn(user, "What is WAL?")

    [(calls, estimated, input_tokens, cached, output)] = _uses(user).values()
    assert (calls, estimated, cached) == (1, 1, 0)
    assert input_tokens > 0 and output > 100
    assert TokenSpend.objects.get(user=user).tokens == input_tokens + output


def test_odd_figures_from_a_service_are_not_believed_and_the_call_is_still_counted(user, scripted_model):
    scripted_model.add(
        Text("One.", usage_sent={"prompt_tokens": -5, "completion_tokens": 3, "total_tokens": -2}),
    )

    _turn(user, "What is WAL?")

    [(calls, estimated, *_)] = _uses(user).values()
    assert (calls, estimated) == (1, 1)


# --- the report ------------------------------------------------------------------------


@pytest.fixture
def team(db, priced_models):
    """Two people in a group (one of them in a second), a third in none, and a
    month of their calls: the deep model priced, the fast one not."""
    ana, bo, chen = UserFactory(username="ana"), UserFactory(username="bo"), UserFactory(username="陈静")
    research, editors = Group.objects.create(name="研究组"), Group.objects.create(name="editors")
    research.user_set.add(ana, bo)
    editors.user_set.add(bo)
    TokenUseFactory(user=ana, day=TODAY, input_tokens=1_000_000, cached_tokens=2_000_000, output_tokens=100_000)
    TokenUseFactory(user=ana, day=TODAY - datetime.timedelta(days=10), kind="compaction", input_tokens=500_000)
    TokenUseFactory(user=bo, day=TODAY, model="fast-model", kind="search_agent", calls=3, estimated_calls=1)
    TokenUseFactory(user=chen, day=TODAY.replace(day=1), kind="title", input_tokens=300, output_tokens=10)
    # Outside the period.
    TokenUseFactory(user=chen, day=TODAY - datetime.timedelta(days=40), input_tokens=9_999_999)
    return SimpleNamespace(ana=ana, bo=bo, chen=chen, research=research, editors=editors)


def _month(**filters) -> UsageFilter:
    return UsageFilter(start=TODAY.replace(day=1), end=TODAY, **filters)


def test_the_report_adds_up_by_person_group_model_kind_and_day_with_costs_at_the_files_prices(team):
    report = usage_report(usage_filter=_month())

    assert report.currency == "EUR" and report.unpriced == ["fast-model"]
    assert report.total.calls == 6 and report.total.estimated_calls == 1
    # 1M input at 3, 2M cached at 0.3, 100k output at 15; 500k input and 200 output; 300 + 10 tokens.
    ana_cost = 3.0 + 0.6 + 1.5 + 1.5 + 0.003
    chen_cost = (300 * 3.0 + 10 * 15.0) / 1_000_000
    assert report.total.cost == pytest.approx(ana_cost + chen_cost)
    people = {row.label: row for row in report.people}
    assert list(people) == ["ana", "bo", "陈静"]
    assert people["ana"].cost == pytest.approx(ana_cost) and people["ana"].tokens == 3_600_200
    # The unpriced model's tokens are counted, not costed.
    assert people["bo"].cost is None and people["bo"].tokens == 1_200
    groups = {row.label: row for row in report.groups}
    # bo is in both groups, and counts in both.
    assert groups == {"研究组": groups["研究组"], "editors": groups["editors"]}
    assert groups["研究组"].tokens == 3_600_200 + 1_200 and groups["editors"].tokens == 1_200
    assert {row.key: row.calls for row in report.models} == {"deep-model": 3, "fast-model": 3}
    assert {row.label: row.tokens for row in report.kinds} == {
        "Lead agent": 3_100_000,
        "Context summaries": 500_200,
        "Search agent": 1_200,
        "Titles": 310,
    }
    assert [row.key for row in report.periods] == [
        TODAY.replace(day=1),
        TODAY - datetime.timedelta(days=10),
        TODAY,
    ]
    assert sum(row.tokens for row in report.periods) == report.total.tokens


def test_the_report_filters_by_person_group_model_and_kind(team):
    assert usage_report(usage_filter=_month(person_id=team.chen.pk)).total.tokens == 310
    by_group = usage_report(usage_filter=_month(group_id=team.editors.pk))
    assert [row.label for row in by_group.people] == ["bo"] and [row.label for row in by_group.groups] == ["editors"]
    assert usage_report(usage_filter=_month(model="fast-model")).total.tokens == 1_200
    assert usage_report(usage_filter=_month(kind="compaction")).total.calls == 1


def test_weeks_and_months_start_on_their_first_day_on_either_database(team):
    weeks = usage_report(usage_filter=_month(grain=WEEK)).periods
    assert all(row.key.weekday() == 0 for row in weeks)
    assert sum(row.tokens for row in weeks) == usage_report(usage_filter=_month()).total.tokens
    year = UsageFilter(start=TODAY.replace(month=1, day=1), end=TODAY, grain=MONTH)
    months = usage_report(usage_filter=year).periods
    assert [row.key for row in months] == [datetime.date(2026, 10, 1), datetime.date(2026, 11, 1)]


def test_each_person_shows_their_budget_and_todays_spending(team, settings):
    settings.DAILY_TOKEN_BUDGET = 50_000
    TokenSpendFactory(user=team.ana, tokens=45_000)

    people = {row.label: row for row in usage_report(usage_filter=_month()).people}

    assert (people["ana"].budget, people["ana"].today, people["ana"].budget_share) == (50_000, 45_000, 90)
    assert (people["bo"].today, people["bo"].budget_share) == (0, 0)


def test_the_csv_holds_every_row_of_every_table_shown(team):
    report = usage_report(usage_filter=_month())

    rows = list(usage_csv_rows(report))

    assert rows[0][0] == "table" and "estimated cost (EUR)" in rows[0]
    tables = [row[0] for row in rows[1:]]
    assert tables.count("person") == len(report.people) == 3
    assert tables.count("group") == 2 and tables.count("day") == 3 and tables.count("kind") == 4
    [total] = [row for row in rows if row[0] == "total"]
    assert total[8] == report.total.tokens and total[9] == f"{report.total.cost:.4f}"
    assert any(row[2] == "陈静" for row in rows)


@pytest.mark.parametrize("days", [1, 365])
def test_the_report_takes_the_same_queries_however_many_days_people_and_models(
    days, db, priced_models, django_assert_num_queries
):
    people = [UserFactory() for _ in range(3 if days == 1 else 12)]
    group = Group.objects.create(name="team")
    group.user_set.add(*people)
    today = timezone.localdate()
    TokenUse.objects.bulk_create(
        TokenUse(
            user=person, day=today - datetime.timedelta(days=day), model=model, kind=kind, calls=1, input_tokens=10
        )
        for person in people
        for day in range(days)
        for model in ("deep-model", "fast-model")
        for kind in ("lead_agent", "search_agent")
    )
    usage_filter = UsageFilter(start=today - datetime.timedelta(days=400), end=today, grain=MONTH)

    # The figures by person, model and kind; by period; the names; the
    # budgets; today's spending; the groups.
    with django_assert_num_queries(6):
        report = usage_report(usage_filter=usage_filter)

    assert report.total.calls == len(people) * days * 4
