"""Research asked again on a schedule: when it runs next, how a sweep starts
its turn once however many sweep at once, how failures back off and pause it,
and what its unattended turn does through the engine and the scripted model."""

import threading
import zoneinfo
from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connections
from django.utils import timezone
from django_q.models import Schedule as QSchedule

from agents.models import Run, RunEvent, RunNotice
from agents.selectors import MARK_FINISHED, conversation_marks
from agents.services.execution import run_execute
from agents.services.notices import notices_seen
from artifacts.models import Artifact
from conversations import lifecycle
from projects.models import Schedule
from projects.schedules import (
    BACKOFF,
    MAX_FAILURES,
    SCHEDULE_NAME,
    schedule_failed,
    schedule_next,
    schedule_pause,
    schedule_resume,
    schedule_set,
    schedules_run_due,
)
from tests.agents.test_engine import call
from tests.factories import (
    ConversationFactory,
    LibraryDocumentFactory,
    MessageFactory,
    ProjectFactory,
    ProjectMemberFactory,
    RunFactory,
    ScheduleFactory,
    TokenSpendFactory,
    UserFactory,
)
from tests.model_server import Text

pytestmark = pytest.mark.django_db

SHANGHAI = zoneinfo.ZoneInfo("Asia/Shanghai")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


def _utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def _schedule(frequency="daily", at=time(9, 0), zone="Asia/Shanghai", **fields) -> Schedule:
    return Schedule(frequency=frequency, time=at, time_zone=zone, **fields)


def _next(schedule, after) -> datetime:
    return schedule_next(schedule=schedule, after=after)


# --- When a schedule runs next --------------------------------------------------------------


def test_a_daily_schedule_runs_at_its_time_in_its_zone():
    daily = _schedule()

    # 08:30 in Shanghai (UTC+8): 09:00 the same day.
    assert _next(daily, _utc(2025, 3, 10, 0, 30)) == _utc(2025, 3, 10, 1, 0)
    # Strictly after: at 09:00 itself, the next day's.
    assert _next(daily, _utc(2025, 3, 10, 1, 0)) == _utc(2025, 3, 11, 1, 0)
    # 20:00 UTC is already 04:00 the next day in Shanghai.
    assert _next(daily, _utc(2025, 3, 9, 20, 0)) == _utc(2025, 3, 10, 1, 0)


def test_a_weekly_schedule_runs_on_its_weekdays_only():
    # Mondays and Thursdays.
    weekly = _schedule("weekly", weekdays=[0, 3])

    # Tuesday 11 March → Thursday 13th; Thursday after 09:00 → Monday 17th.
    assert _next(weekly, _utc(2025, 3, 11, 2, 0)) == _utc(2025, 3, 13, 1, 0)
    assert _next(weekly, _utc(2025, 3, 13, 1, 0)) == _utc(2025, 3, 17, 1, 0)
    assert _next(weekly, _utc(2025, 3, 13, 1, 0)).astimezone(SHANGHAI).weekday() == 0


def test_a_weekly_schedule_without_a_day_never_runs():
    with pytest.raises(ValidationError, match="never runs"):
        _next(_schedule("weekly", weekdays=[]), _utc(2025, 3, 11))


@pytest.mark.parametrize(
    "after, expected",
    [
        # The 31st of a month shorter than it is its last day, in a leap year too.
        (_utc(2025, 1, 31, 2, 0), _utc(2025, 2, 28, 1, 0)),
        (_utc(2024, 1, 31, 2, 0), _utc(2024, 2, 29, 1, 0)),
        (_utc(2025, 3, 31, 2, 0), _utc(2025, 4, 30, 1, 0)),
        (_utc(2025, 2, 28, 2, 0), _utc(2025, 3, 31, 1, 0)),
        (_utc(2025, 12, 31, 2, 0), _utc(2026, 1, 31, 1, 0)),
    ],
)
def test_a_monthly_schedule_on_the_31st_runs_on_a_short_months_last_day(after, expected):
    assert _next(_schedule("monthly", day_of_month=31), after) == expected


def test_a_monthly_schedule_on_the_15th():
    monthly = _schedule("monthly", day_of_month=15, at=time(18, 30))

    assert _next(monthly, _utc(2025, 2, 15, 10, 0)) == _utc(2025, 2, 15, 10, 30)
    assert _next(monthly, _utc(2025, 2, 15, 10, 30)) == _utc(2025, 3, 15, 10, 30)


def test_a_new_york_schedule_keeps_its_local_time_across_the_clock_changes():
    daily = _schedule(zone="America/New_York")

    # 09:00 EST is 14:00 UTC; after the spring change, 09:00 EDT is 13:00 UTC.
    assert _next(daily, _utc(2025, 3, 8, 12, 0)) == _utc(2025, 3, 8, 14, 0)
    assert _next(daily, _utc(2025, 3, 8, 14, 0)) == _utc(2025, 3, 9, 13, 0)
    # And back in November.
    assert _next(daily, _utc(2025, 11, 1, 13, 0)) == _utc(2025, 11, 2, 14, 0)


def test_a_time_the_spring_change_skips_runs_an_hour_later():
    # 02:30 does not exist in New York on 9 March 2025: 03:30 EDT, 07:30 UTC.
    daily = _schedule(zone="America/New_York", at=time(2, 30))

    moment = _next(daily, _utc(2025, 3, 9, 0, 0))

    assert moment == _utc(2025, 3, 9, 7, 30)
    assert moment.astimezone(NEW_YORK).strftime("%H:%M %Z") == "03:30 EDT"
    assert _next(daily, moment) == _utc(2025, 3, 10, 6, 30)


def test_a_time_the_autumn_change_repeats_runs_once():
    # 01:30 happens twice in New York on 2 November 2025: 05:30 UTC (EDT) and 06:30 UTC (EST).
    daily = _schedule(zone="America/New_York", at=time(1, 30))

    first = _next(daily, _utc(2025, 11, 2, 4, 0))

    assert first == _utc(2025, 11, 2, 5, 30)
    assert _next(daily, first) == _utc(2025, 11, 3, 6, 30)
    # Between the two 01:30s: tomorrow's, not the repeat.
    assert _next(daily, _utc(2025, 11, 2, 6, 0)) == _utc(2025, 11, 3, 6, 30)


def test_the_next_run_is_after_a_moment_given_in_the_schedules_own_zone():
    # 01:15 the second time (EST, 06:15 UTC): the first 01:30 (05:30 UTC) has passed.
    daily = _schedule(zone="America/New_York", at=time(1, 30))
    after = datetime(2025, 11, 2, 1, 15, fold=1, tzinfo=NEW_YORK)

    moment = _next(daily, after)

    assert moment > after
    assert moment == _utc(2025, 11, 3, 6, 30)


# --- Setting, pausing and resuming -----------------------------------------------------------


@pytest.fixture
def conversation(user):
    return ConversationFactory(owner=user)


def _set(conversation, **fields):
    return schedule_set(
        **{
            "conversation": conversation,
            "question": "本周热泵价格有何变化？",
            "frequency": "weekly",
            "weekdays": [0],
            "at": time(9, 0),
            "time_zone": "Asia/Shanghai",
            **fields,
        }
    )


def test_setting_a_schedule_plans_its_first_run(conversation):
    before = timezone.now()

    schedule = _set(conversation, weekdays=[4, 0, 0, 9, -1], allowed_tools=["web_fetch", "web_fetch"])

    stored = Schedule.objects.get(conversation=conversation)
    assert stored.pk == schedule.pk
    assert stored.weekdays == [0, 4] and stored.allowed_tools == ["web_fetch"]
    assert before < stored.next_run_at <= before + timedelta(days=7)
    assert stored.next_run_at.astimezone(SHANGHAI).strftime("%H:%M") == "09:00"
    assert stored.next_run_at.astimezone(SHANGHAI).weekday() in (0, 4)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"question": "  \x00 "}, "Say what to ask"),
        ({"frequency": "hourly"}, "daily, weekly or monthly"),
        ({"weekdays": []}, "at least one day of the week"),
        ({"frequency": "monthly", "day_of_month": 32}, "from 1 to 31"),
        ({"frequency": "monthly", "day_of_month": 0}, "from 1 to 31"),
        ({"time_zone": "Mars/Olympus"}, "is not a time zone"),
        ({"time_zone": ""}, "is not a time zone"),
        ({"time_zone": "../../etc/passwd"}, "is not a time zone"),
    ],
)
def test_a_schedule_that_cannot_run_is_refused(conversation, fields, message):
    with pytest.raises(ValidationError, match=message):
        _set(conversation, **fields)
    assert not Schedule.objects.exists()


def test_setting_it_again_changes_it_and_resumes_it_if_paused(conversation):
    schedule = _set(conversation)
    schedule_failed(schedule=schedule, error="model down")
    schedule_pause(schedule=Schedule.objects.get(pk=schedule.pk), reason="Paused by its owner.")

    changed = _set(conversation, frequency="daily", time_zone="America/New_York", at=time(7, 0))

    stored = Schedule.objects.get(pk=schedule.pk)
    assert changed.pk == schedule.pk and Schedule.objects.count() == 1
    assert (stored.paused_at, stored.pause_reason, stored.failures, stored.last_error) == (None, "", 0, "")
    assert stored.next_run_at.astimezone(NEW_YORK).strftime("%H:%M") == "07:00"


def test_a_paused_schedule_has_no_next_run_and_resuming_gives_it_one(conversation):
    schedule = schedule_pause(schedule=_set(conversation), reason="On holiday.")
    assert (schedule.next_run_at, schedule.pause_reason) == (None, "On holiday.")

    schedule_resume(schedule=schedule)

    stored = Schedule.objects.get(pk=schedule.pk)
    assert stored.paused_at is None and stored.next_run_at > timezone.now()


# --- The sweep ----------------------------------------------------------------------------------


def test_the_workers_sweep_for_due_schedules_every_minute():
    sweep = QSchedule.objects.get(name=SCHEDULE_NAME)

    assert (sweep.func, sweep.schedule_type, sweep.minutes, sweep.repeats) == (
        "projects.schedules.schedules_run_due",
        QSchedule.MINUTES,
        1,
        -1,
    )


def _due(**fields) -> Schedule:
    """A schedule of the conversation's owner, a minute overdue."""
    return ScheduleFactory(next_run_at=timezone.now() - timedelta(minutes=1), **fields)


def test_a_due_schedule_starts_one_turn_asking_its_question_and_moves_on(conversation):
    schedule = _due(conversation=conversation)
    now = timezone.now()

    assert schedules_run_due(now=now) == 1

    [run] = Run.objects.all()
    assert run.schedule == schedule and run.status == Run.Status.QUEUED
    assert run.message.content == schedule.question and run.message.conversation == conversation
    assert Run.objects.get(pk=run.pk).message == conversation.__class__.objects.get(pk=conversation.pk).active_branch
    schedule.refresh_from_db()
    assert schedule.last_run_at == now
    assert schedule.next_run_at == _next(schedule, now) and schedule.next_run_at > now


def test_the_same_sweep_twice_starts_one_turn(conversation):
    _due(conversation=conversation)
    now = timezone.now()

    assert schedules_run_due(now=now) == 1
    assert schedules_run_due(now=now) == 0

    assert Run.objects.count() == 1


def test_a_schedule_missed_for_days_runs_once_and_then_at_its_next_time(conversation):
    schedule = ScheduleFactory(conversation=conversation, next_run_at=timezone.now() - timedelta(days=3))
    now = timezone.now()

    assert schedules_run_due(now=now) == 1

    schedule.refresh_from_db()
    assert now < schedule.next_run_at <= now + timedelta(days=1)
    assert Run.objects.count() == 1


def test_schedules_not_due_or_paused_start_nothing(user):
    ScheduleFactory(conversation=ConversationFactory(owner=user), next_run_at=timezone.now() + timedelta(minutes=5))
    paused = ScheduleFactory(
        conversation=ConversationFactory(owner=user), next_run_at=timezone.now() - timedelta(hours=1)
    )
    Schedule.objects.filter(pk=paused.pk).update(paused_at=timezone.now())
    ScheduleFactory(conversation=ConversationFactory(owner=user), next_run_at=None)

    assert schedules_run_due() == 0
    assert not Run.objects.exists()


def test_each_due_schedule_starts_its_own_turn(user, other_user):
    schedules = [_due(conversation=ConversationFactory(owner=owner)) for owner in (user, user, other_user)]

    assert schedules_run_due() == 3

    assert sorted(Run.objects.values_list("schedule", flat=True)) == sorted(s.pk for s in schedules)


def test_a_schedule_whose_conversation_has_a_turn_running_waits_and_counts_a_failure(conversation):
    RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    # Its regular run days off, whatever the hour the test runs: later than the first wait.
    in_three_days = (timezone.now().astimezone(SHANGHAI).weekday() + 3) % 7
    schedule = _due(conversation=conversation, frequency="weekly", weekdays=[in_three_days])
    before = timezone.now()

    assert schedules_run_due() == 0

    schedule.refresh_from_db()
    assert Run.objects.filter(schedule=schedule).count() == 0
    assert schedule.failures == 1 and "A turn is still running in this conversation" in schedule.last_error
    assert before + BACKOFF[0] <= schedule.next_run_at <= timezone.now() + BACKOFF[0]
    assert schedule.paused_at is None


def test_a_schedule_whose_owner_spent_todays_budget_waits_and_counts_a_failure(conversation, settings):
    settings.DAILY_TOKEN_BUDGET = 1_000
    TokenSpendFactory(user=conversation.owner, tokens=1_000)
    schedule = _due(conversation=conversation)

    assert schedules_run_due() == 0

    schedule.refresh_from_db()
    assert schedule.failures == 1 and schedule.last_error
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_start_one_turn(user):
    schedules = [_due(conversation=ConversationFactory(owner=user)) for _ in range(2)]
    now = timezone.now()
    barrier = threading.Barrier(2)
    started, errors = [], []

    def sweep():
        try:
            barrier.wait()
            started.append(schedules_run_due(now=now))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sum(started) == 2
    for schedule in schedules:
        assert Run.objects.filter(schedule=schedule).count() == 1


# --- Failures ---------------------------------------------------------------------------------


def test_failures_back_off_and_the_third_in_a_row_pauses_saying_why(conversation):
    # Each sweep finds a turn still running in the conversation: the schedule cannot start its own.
    RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    # Its regular run two days off at least, whatever the day the test runs: later than any wait.
    in_three_days = (timezone.now().astimezone(SHANGHAI).weekday() + 3) % 7
    schedule = _set(conversation, frequency="weekly", weekdays=[in_three_days])
    waits = []

    for number in range(1, MAX_FAILURES + 1):
        Schedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - timedelta(minutes=1))
        before = timezone.now()
        assert schedules_run_due() == 0
        schedule.refresh_from_db()
        assert schedule.failures == number
        if number < MAX_FAILURES:
            assert schedule.paused_at is None
            waits.append(schedule.next_run_at - before)

    # Each wait longer than the one before, and sooner than the next month's run.
    assert BACKOFF[0] <= waits[0] < BACKOFF[0] + timedelta(minutes=1)
    assert BACKOFF[1] <= waits[1] < BACKOFF[1] + timedelta(minutes=1)
    assert schedule.paused_at is not None and schedule.next_run_at is None
    assert schedule.pause_reason.startswith("Paused after 3 failed runs in a row. The last: A turn is still running")
    assert schedule.last_error.startswith("A turn is still running")
    assert not Run.objects.filter(schedule=schedule).exists()


def test_a_failure_counted_by_hand_says_its_error_in_the_pause(conversation):
    schedule = _set(conversation)

    for number in range(1, MAX_FAILURES + 1):
        schedule = schedule_failed(schedule=schedule, error=f"模型服务不可用 ({number})")

    stored = Schedule.objects.get(pk=schedule.pk)
    assert stored.failures == MAX_FAILURES and stored.paused_at is not None and stored.next_run_at is None
    assert stored.pause_reason == "Paused after 3 failed runs in a row. The last: 模型服务不可用 (3)"
    assert stored.last_error == "模型服务不可用 (3)"


def test_a_failure_never_puts_off_a_run_due_sooner_than_the_wait(conversation):
    soon = timezone.now() + timedelta(minutes=10)
    schedule = ScheduleFactory(conversation=conversation, next_run_at=soon)

    assert schedule_failed(schedule=schedule, error="down").next_run_at == soon


def test_a_paused_schedule_is_not_swept_and_resumed_runs_again(conversation):
    schedule = _due(conversation=conversation)
    for _ in range(MAX_FAILURES):
        schedule = schedule_failed(schedule=schedule, error="down")
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - timedelta(minutes=1))

    assert schedules_run_due() == 0

    schedule_resume(schedule=Schedule.objects.get(pk=schedule.pk))
    stored = Schedule.objects.get(pk=schedule.pk)
    assert (stored.failures, stored.paused_at, stored.pause_reason) == (0, None, "")
    assert stored.next_run_at > timezone.now()


# --- Its turns, through the engine and the scripted model -------------------------------------------


def _swept(schedule) -> Run:
    """The schedule made due, swept, and its turn executed here."""
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - timedelta(minutes=1))
    assert schedules_run_due() == 1
    run = Run.objects.filter(schedule=schedule).order_by("-pk").first()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_a_scheduled_turn_that_fails_counts_and_one_that_completes_clears_the_count(
    conversation, scripted_model, settings
):
    schedule = _due(conversation=conversation)
    settings.MAX_TOOL_ROUNDS = {"poet": 3}

    failed = _swept(schedule)

    assert failed.status == Run.Status.FAILED
    schedule.refresh_from_db()
    assert schedule.failures == 1 and schedule.last_error == failed.error and failed.error
    # Saved again without its status (its metrics, say), it is not counted again.
    failed.save(update_fields=["metrics"])
    assert Schedule.objects.get(pk=schedule.pk).failures == 1

    settings.MAX_TOOL_ROUNDS = {}
    scripted_model.add(Text("Done."))
    completed = _swept(schedule)

    assert completed.status == Run.Status.COMPLETED
    schedule.refresh_from_db()
    assert (schedule.failures, schedule.last_error) == (0, "")


def test_three_scheduled_turns_failing_in_a_row_pause_the_schedule(conversation, scripted_model, settings):
    schedule = _due(conversation=conversation)
    settings.MAX_TOOL_ROUNDS = {"poet": 3}

    for _ in range(MAX_FAILURES):
        _swept(schedule)

    schedule.refresh_from_db()
    assert schedule.paused_at is not None and schedule.next_run_at is None
    assert schedule.pause_reason.startswith("Paused after 3 failed runs in a row. The last: ")
    assert "poet" in schedule.pause_reason


def test_a_turn_not_started_by_a_schedule_leaves_the_schedule_alone(conversation, scripted_model, settings):
    schedule = _due(conversation=conversation)
    settings.MAX_TOOL_ROUNDS = {"poet": 3}
    message = lifecycle.message_post(conversation=conversation, content="By hand", enqueue=False)

    run_execute(run_id=message.runs.get().pk)

    assert message.runs.get().status == Run.Status.FAILED
    assert Schedule.objects.get(pk=schedule.pk).failures == 0


@pytest.fixture
def document():
    return LibraryDocumentFactory(title="热泵报价", content="主流机型售价约12万元。")


def _crawl_script(scripted_model, document):
    scripted_model.add(
        Text(call("call_subagent", agent="crawl_agent", instruction=f"Read {document.url}")),
        Text(call("web_fetch", url=document.url)),
        Text("Read what there was."),
        Text("The prices, as far as they could be read."),
    )


def test_a_scheduled_turn_skips_a_tool_that_needs_approval_and_names_it(conversation, scripted_model, document):
    schedule = _due(conversation=conversation)
    _crawl_script(scripted_model, document)

    run = _swept(schedule)

    # No one is asked: the turn goes on and ends.
    assert run.status == Run.Status.COMPLETED
    assert not run.events.filter(type=RunEvent.Type.PERMISSION_REQUEST).exists()
    told = scripted_model.requests[2]["messages"][-1]["content"]
    assert "needs the user's approval" in told and "主流机型" not in told
    [fetch] = [e.data for e in run.events.filter(type=RunEvent.Type.TOOL_COMPLETE) if e.data["tool"] == "web_fetch"]
    assert fetch["success"] is False
    answer = run.message.response
    assert answer.startswith("**What changed since this research was last asked**")
    assert (
        "Not run: `web_fetch`, which needs your approval. Allow it for this schedule to let it run unattended."
        in answer
    )
    assert answer.endswith("The prices, as far as they could be read.")


def test_a_tool_allowed_for_the_schedule_runs_unattended(conversation, scripted_model, document):
    schedule = _due(conversation=conversation, allowed_tools=["web_fetch"])
    _crawl_script(scripted_model, document)

    run = _swept(schedule)

    assert run.status == Run.Status.COMPLETED
    assert "主流机型售价约12万元" in scripted_model.requests[2]["messages"][-1]["content"]
    assert "Not run" not in run.message.response
    assert not run.events.filter(type=RunEvent.Type.PERMISSION_REQUEST).exists()


def test_a_turn_by_hand_in_a_scheduled_conversation_still_asks(conversation, scripted_model, document):
    ScheduleFactory(conversation=conversation, next_run_at=timezone.now() + timedelta(days=1))
    scripted_model.add(
        Text(call("call_subagent", agent="crawl_agent", instruction=f"Read {document.url}")),
        Text(call("web_fetch", url=document.url)),
    )
    message = lifecycle.message_post(conversation=conversation, content="Read the prices", enqueue=False)

    run_execute(run_id=message.runs.get().pk)

    assert message.runs.get().status == Run.Status.WAITING_PERMISSION


REPORT = """# 热泵市场周报

## 价格

主流机型售价约12万元。

## 销量

本月销量1,200台。
"""


def test_the_next_scheduled_answer_opens_with_what_changed_in_the_report(conversation, scripted_model):
    schedule = _due(conversation=conversation)
    scripted_model.add(
        Text(call("create_artifact", id="report", title="热泵市场周报", content=REPORT)),
        Text("The report is written."),
    )
    first = _swept(schedule)
    scripted_model.add(
        Text(call("update_artifact", id="report", old_str="约12万元", new_str="约15万元")),
        Text(
            call(
                "update_artifact",
                id="report",
                old_str="本月销量1,200台。",
                new_str="本月销量1,200台。\n\n## 风险\n\n低温下效率下降。",
            )
        ),
        Text("The report is brought up to date."),
    )

    second = _swept(schedule)

    assert first.status == second.status == Run.Status.COMPLETED
    assert first.message.response.startswith("**What changed since this research was last asked**")
    assert "- New: “热泵市场周报”." in first.message.response
    answer = second.message.response
    assert answer.startswith("**What changed since the last run (")
    assert "- “热泵市场周报”: section “风险” added; section “价格” changed (figures: 12万 → 15万)." in answer
    assert "销量" not in answer.split("---")[0]
    assert answer.endswith("The report is brought up to date.")
    assert Artifact.objects.get(artifact_id="report").content.count("15万") == 1


def test_a_scheduled_turn_that_changed_no_report_says_so(conversation, scripted_model):
    schedule = _due(conversation=conversation)
    scripted_model.add(
        Text(call("create_artifact", id="report", title="热泵市场周报", content=REPORT)), Text("Written.")
    )
    _swept(schedule)
    scripted_model.add(Text("Nothing new this week."))

    run = _swept(schedule)

    assert run.message.response.startswith("**What changed since the last run (")
    assert "- Nothing in the reports changed." in run.message.response


def test_a_scheduled_turn_its_owner_stops_is_no_failure(conversation):
    schedule = _due(conversation=conversation)
    assert schedules_run_due() == 1
    run = Run.objects.get(schedule=schedule)

    run.status = Run.Status.CANCELLED
    run.save(update_fields=["status"])

    schedule.refresh_from_db()
    assert (schedule.failures, schedule.paused_at) == (0, None)


# --- Telling the project's readers -----------------------------------------------------------


def test_a_completed_scheduled_turn_marks_it_in_the_lists_of_the_projects_readers_until_they_look(
    user, other_user, scripted_model
):
    group = Group.objects.create(name="热泵读者")
    in_group, outsider = UserFactory(), UserFactory()
    in_group.groups.add(group)
    project = ProjectFactory(owner=user)
    ProjectMemberFactory(project=project, user=other_user)
    ProjectMemberFactory(project=project, group=group, user=None)
    schedule = _due(conversation=ConversationFactory(owner=user, project=project, title="热泵周报"))
    scripted_model.add(Text("本周价格没有变化。"))

    run = _swept(schedule)

    assert run.status == Run.Status.COMPLETED
    assert set(RunNotice.objects.filter(run=run).values_list("user", flat=True)) == {other_user.pk, in_group.pk}
    for reader in (other_user, in_group):
        marks = conversation_marks(user=reader)
        assert marks.get(schedule.conversation_id) == MARK_FINISHED
        assert marks.titles[schedule.conversation_id] == "热泵周报" and marks.waiting_count == 1
    assert conversation_marks(user=outsider).marks == {}

    notices_seen(user=other_user, conversation_id=schedule.conversation_id)

    assert conversation_marks(user=other_user).marks == {}
    assert conversation_marks(user=in_group).get(schedule.conversation_id) == MARK_FINISHED


def test_a_scheduled_turn_outside_any_project_tells_no_one_but_its_owner(conversation, scripted_model):
    schedule = _due(conversation=conversation)
    scripted_model.add(Text("Done."))

    run = _swept(schedule)

    assert run.status == Run.Status.COMPLETED and not RunNotice.objects.exists()
    assert conversation_marks(user=conversation.owner).get(conversation.pk) == MARK_FINISHED


def test_a_schedule_changed_by_hand_to_never_run_is_paused_by_the_sweep_saying_why(conversation):
    broken = _due(conversation=conversation, frequency="weekly", weekdays=[])
    other = _due(conversation=ConversationFactory(owner=conversation.owner))

    assert schedules_run_due() == 1

    broken.refresh_from_db()
    assert broken.paused_at and broken.next_run_at is None
    assert broken.pause_reason == "This schedule never runs: choose at least one day."
    assert Run.objects.filter(schedule=other).count() == 1
