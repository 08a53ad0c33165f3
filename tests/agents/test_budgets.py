"""Daily token budgets (agents.budgets): a question is refused once the day's
budget is spent, and every model call is reserved before it is made and
settled after, so turns running side by side cannot spend past the budget by
more than the calls under way."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from agents.budgets import (
    BUDGET_SPENT,
    RESERVED_REPLY_TOKENS,
    BudgetSpent,
    budget_of,
    metrics_tokens,
    spend_reserve,
    spend_settle,
    tokens_today,
)
from agents.models import Run, TokenBudget
from agents.services.execution import run_execute, run_start
from agents.services.runs import BudgetSpent as QuestionRefused
from agents.services.runs import run_retry
from artifacts.models import Artifact
from conversations import lifecycle
from tests.agents.test_engine import call
from tests.factories import TokenSpendFactory, UserFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db


def _question(user, content="What is WAL?") -> Run:
    return lifecycle.conversation_start(user=user, content=content, enqueue=False).active_branch.runs.get()


def _ran(run: Run) -> Run:
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _calls_cost(run: Run) -> list[int]:
    return [record["token_usage"]["total_tokens"] for record in run.metrics["agent_executions"]]


# --- asking -----------------------------------------------------------------------------


def test_a_spent_daily_budget_refuses_the_question_and_a_retry_with_a_message(user, settings):
    settings.DAILY_TOKEN_BUDGET = 1_000
    failed = _question(user)
    Run.objects.filter(pk=failed.pk).update(status=Run.Status.FAILED)
    TokenSpendFactory(user=user, tokens=1_100)

    with pytest.raises(ValidationError, match="used today's token budget: 1,100 of 1,000 tokens"):
        lifecycle.conversation_start(user=user, content="One more?")
    with pytest.raises(QuestionRefused):
        run_retry(run_id=failed.pk, user=user)


def test_the_refused_question_stays_in_the_composer(client, user, settings):
    settings.DAILY_TOKEN_BUDGET = 100
    TokenSpendFactory(user=user, tokens=100)
    client.force_login(user)
    response = client.post(reverse("conversation-create"), {"content": "My careful draft"})
    html = response.content.decode()
    assert "used today&#x27;s token budget" in html or "used today's token budget" in html
    assert "My careful draft" in html
    assert not Run.objects.filter(message__content="My careful draft").exists()


def test_a_users_budget_comes_before_their_groups_and_the_default(user, settings):
    settings.DAILY_TOKEN_BUDGET = 1_000
    assert budget_of(user=user) == 1_000
    team, other_team = Group.objects.create(name="team"), Group.objects.create(name="other")
    user.groups.add(team, other_team)
    TokenBudget.objects.create(group=team, daily_tokens=5_000)
    TokenBudget.objects.create(group=other_team, daily_tokens=20_000)
    assert budget_of(user=user) == 20_000
    TokenBudget.objects.create(user=user, daily_tokens=0)
    assert budget_of(user=user) == 0
    assert budget_of(user=UserFactory()) == 1_000


def test_another_users_tokens_and_yesterdays_do_not_count(user, other_user, settings):
    settings.DAILY_TOKEN_BUDGET = 100
    TokenSpendFactory(user=other_user, tokens=500)
    TokenSpendFactory(user=user, tokens=500, day=timezone.localdate() - timedelta(days=1))
    assert tokens_today(user_id=user.pk) == 0
    lifecycle.conversation_start(user=user, content="Mine to ask.", enqueue=False)


# --- each model call --------------------------------------------------------------------


def test_each_call_is_counted_as_the_service_reported_it(user, scripted_model):
    scripted_model.add(Text(call("create_artifact", id="notes", content="draft")), Text("写好了。"))

    run = _ran(_question(user))

    assert run.status == Run.Status.COMPLETED
    assert tokens_today(user_id=user.pk) == sum(_calls_cost(run)) == metrics_tokens(run.metrics) > 0


def test_a_service_that_reports_no_usage_is_counted_by_estimate(user, scripted_model):
    scripted_model.add(Text("没有用量的回答。" * 50, usage=False))

    run = _ran(_question(user, "估算一下"))

    assert run.status == Run.Status.COMPLETED
    [request] = scripted_model.requests
    # At least the answer's 400 Han characters and the request's own text.
    assert tokens_today(user_id=user.pk) > 400 + len(request["messages"][0]["content"]) // 4


@pytest.mark.parametrize("prompt_tokens", [-(10**30), 10**30], ids=["negative", "past-any-model"])
def test_a_service_reporting_nonsense_usage_is_counted_by_estimate_and_the_turn_completes(
    user, scripted_model, prompt_tokens
):
    scripted_model.add(Text("一个回答。" * 20, prompt_tokens=prompt_tokens))

    run = _ran(_question(user, "估算一下"))

    assert run.status == Run.Status.COMPLETED
    [request] = scripted_model.requests
    assert 100 + len(request["messages"][0]["content"]) // 4 < tokens_today(user_id=user.pk) < 100_000


def test_deleting_the_conversation_gives_no_budget_back(user, scripted_model):
    scripted_model.add(Text("An answer."))
    run = _ran(_question(user))
    spent = tokens_today(user_id=user.pk)

    lifecycle.conversation_delete(conversation=run.message.conversation)

    assert spent > 0 and tokens_today(user_id=user.pk) == spent


def test_a_turn_stops_before_the_call_after_its_budget_is_spent_and_keeps_its_work(user, scripted_model, settings):
    settings.DAILY_TOKEN_BUDGET = 1_000
    TokenSpendFactory(user=user, tokens=999)
    scripted_model.add(
        Text("Planning first.\n" + call("create_artifact", id="notes", content="# Notes\n\nKept.")),
        Text("Never asked."),
    )

    run = _ran(_question(user))

    # The call that started under the budget was made; the next one was not.
    assert len(scripted_model.requests) == 1
    assert run.status == Run.Status.FAILED and run.error == BUDGET_SPENT
    assert tokens_today(user_id=user.pk) == 999 + sum(_calls_cost(run))
    assert Artifact.objects.get(session_id=run.message.conversation_id, artifact_id="notes").content.endswith("Kept.")


def test_a_turn_admitted_after_the_budget_ran_out_fails_without_a_call(user, scripted_model, settings):
    """A turn asked within the budget and left waiting (its person's other turns
    held the slots) meanwhile spent by them."""
    settings.DAILY_TOKEN_BUDGET = 1_000
    run = _question(user)
    TokenSpendFactory(user=user, tokens=1_000)

    run = _ran(run)

    assert scripted_model.requests == []
    assert run.status == Run.Status.FAILED and run.error == BUDGET_SPENT


def test_leaving_a_generous_group_applies_the_default_budget_from_the_next_call(user, scripted_model, settings):
    settings.DAILY_TOKEN_BUDGET = 1_000
    team = Group.objects.create(name="研究组")
    TokenBudget.objects.create(group=team, daily_tokens=50_000)
    user.groups.add(team)
    TokenSpendFactory(user=user, tokens=5_000)
    run = _question(user)

    user.groups.remove(team)

    assert _ran(run).error == BUDGET_SPENT
    assert scripted_model.requests == []
    with pytest.raises(ValidationError, match="5,000 of 1,000"):
        lifecycle.conversation_start(user=user, content="And now?")


def test_a_groups_budget_stops_its_members_turn_as_their_own_would(user, scripted_model, settings):
    team = Group.objects.create(name="team")
    TokenBudget.objects.create(group=team, daily_tokens=2_000)
    user.groups.add(team)
    TokenSpendFactory(user=user, tokens=1_990)
    scripted_model.add(Text(call("create_artifact", id="notes", content="draft")), Text("Never asked."))

    run = _ran(_question(user))

    assert len(scripted_model.requests) == 1 and run.error == BUDGET_SPENT


def test_the_title_is_counted_and_not_asked_once_the_budget_is_spent(user, scripted_model, settings):
    settings.MODEL_TITLES = True
    scripted_model.add(Text("The answer."), Text("Write-ahead logging"))
    run = _ran(_question(user))
    assert run.message.conversation.title == "Write-ahead logging"
    # The title's call is the run's last: what the turn cost includes it.
    assert [record["agent_name"] for record in run.metrics["agent_executions"]] == ["lead_agent", "title"]
    assert tokens_today(user_id=user.pk) == sum(_calls_cost(run))

    settings.DAILY_TOKEN_BUDGET = tokens_today(user_id=user.pk) + 1
    scripted_model.add(Text("The last answer today."), Text("Never asked"))
    run = _ran(_question(user, "What is a checkpoint?"))

    assert run.status == Run.Status.COMPLETED
    assert run.message.conversation.title == "What is a checkpoint?"
    assert len(scripted_model.requests) == 3


# --- side by side -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_reservations_made_at_once_admit_only_what_the_budget_holds(user, settings):
    settings.DAILY_TOKEN_BUDGET = 5_000
    estimate = 1_000
    start = threading.Barrier(8)
    admitted, refused = [], []

    def reserve():
        try:
            start.wait()
            admitted.append(spend_reserve(user=user, estimate=estimate))
        except BudgetSpent:
            refused.append(True)
        finally:
            connection.close()

    threads = [threading.Thread(target=reserve) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # 0, 2,000 and 4,000 spent are under the budget when each looks; 6,000 is not.
    assert (len(admitted), len(refused)) == (3, 5)
    assert tokens_today(user_id=user.pk) == 3 * (estimate + RESERVED_REPLY_TOKENS)
    for reservation in admitted:
        spend_settle(reservation=reservation, usage={"total_tokens": 700}, reply="", model="m", kind="lead_agent")
    assert tokens_today(user_id=user.pk) == 2_100


@pytest.mark.django_db(transaction=True)
def test_parallel_asks_spend_no_more_than_the_budget_and_one_call(user, scripted_model, settings):
    """The probe's: eight questions at once, three turns of them running side by
    side in one worker process and the rest admitted as those end, each turn
    calling tools for as long as it is let. Before budgets were checked per
    call, every turn ran to its end."""
    settings.DAILY_TOKEN_BUDGET = 12_000
    settings.TURNS_PER_USER = 3
    settings.RUN_TURNS_PER_WORKER = 8
    step = call("update_artifact", id="notes", old_str="x", new_str="y")
    scripted_model.add(*[Text(step, chunk_size=6, delay=0.01) for _ in range(200)])
    runs = [
        lifecycle.conversation_start(user=user, content=f"第{number}个问题").active_branch.runs.get()
        for number in range(8)
    ]

    run_start(run_id=runs[0].pk)

    for run in runs:
        run.refresh_from_db()
    assert {run.status for run in runs} == {Run.Status.FAILED}
    assert {run.error for run in runs} == {BUDGET_SPENT}
    costs = [cost for run in runs for cost in _calls_cost(run)]
    spent = tokens_today(user_id=user.pk)
    # Every call settled: what the ledger holds is what the service reported.
    assert spent == sum(costs) and len(costs) == len(scripted_model.requests)
    assert spent <= settings.DAILY_TOKEN_BUDGET + max(costs)
    # The later turns were admitted, and stopped before their first call.
    assert sum(1 for run in runs if not run.metrics.get("agent_executions")) >= 1
