"""Research that repeats itself: a conversation's question asked again on a
schedule, as a new turn its owner's worker runs unattended.

django-q2's scheduler calls schedules_run_due once a minute (SCHEDULE_NAME,
made at every migrate): each schedule that is due is claimed by a
conditional update of its next run, so however many workers sweep at once,
one starts its turn. The turn is an ordinary one, within its owner's budget
and turn limit, but for two things (agents.engine, agents.services.changes):
a tool set to confirm is skipped and named rather than asked about, unless
the owner allowed it for the schedule; and its answer opens with what
changed since the last run. A schedule whose turn cannot start or fails
waits longer each time (BACKOFF) and pauses at the third failure in a row,
saying why; a completed turn resets the count (projects.signals)."""

import calendar
import logging
import zoneinfo
from datetime import date, datetime, time, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from agents.models import Run
from agents.services.notices import notices_send
from conversations.lifecycle import message_post
from conversations.models import Conversation

from .models import Schedule
from .selectors import project_member_ids

logger = logging.getLogger(__name__)

SCHEDULE_NAME = "artifactflow-research-schedules"
# After the first and the second failure in a row; the third pauses the schedule.
BACKOFF = (timedelta(minutes=30), timedelta(hours=2))
MAX_FAILURES = 3
# Schedules started by one sweep: the next minute's takes the rest.
SWEEP_LIMIT = 50


def time_zone_check(name: str) -> str:
    name = (name or "").strip()
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationError(gettext("“%(zone)s” is not a time zone.") % {"zone": name}) from None
    return name


def _days(*, schedule: Schedule, start: date):
    """The days the schedule runs on, from `start` on (a year of them at most)."""
    for offset in range(370):
        day = start + timedelta(days=offset)
        if schedule.frequency == Schedule.Frequency.DAILY:
            yield day
        elif schedule.frequency == Schedule.Frequency.WEEKLY:
            if day.weekday() in schedule.weekdays:
                yield day
        else:
            last = calendar.monthrange(day.year, day.month)[1]
            if day.day == min(schedule.day_of_month, last):
                yield day


def schedule_next(*, schedule: Schedule, after: datetime) -> datetime:
    """The schedule's first moment strictly after `after`: its time of day in
    its time zone, on its next day. A time a clock change skips runs an hour
    later (zoneinfo's reading of it); one it repeats runs once, the first time."""
    zone, utc = zoneinfo.ZoneInfo(schedule.time_zone), zoneinfo.ZoneInfo("UTC")
    local = after.astimezone(zone)
    # Compared in UTC: two times in one zone compare by their clock, folds ignored.
    after = after.astimezone(utc)
    for day in _days(schedule=schedule, start=local.date()):
        # Through UTC, so a moment in a skipped hour is a real one.
        moment = datetime.combine(day, schedule.time, tzinfo=zone).astimezone(utc)
        if moment > after:
            return moment
    raise ValidationError(gettext("This schedule never runs: choose at least one day."))


def schedule_set(
    *,
    conversation: Conversation,
    question: str,
    frequency: str,
    at: time,
    time_zone: str,
    weekdays: list[int] | tuple[int, ...] = (),
    day_of_month: int = 1,
    allowed_tools: list[str] | tuple[str, ...] = (),
) -> Schedule:
    """Repeat the research of the owner's conversation (the caller's check):
    set its schedule, or change it, which resumes a paused one."""
    question = question.replace("\x00", "").strip()
    if not question:
        raise ValidationError(gettext("Say what to ask each time."))
    if frequency not in Schedule.Frequency.values:
        raise ValidationError(gettext("Choose daily, weekly or monthly."))
    weekdays = sorted({int(day) for day in weekdays if 0 <= int(day) <= 6})
    if frequency == Schedule.Frequency.WEEKLY and not weekdays:
        raise ValidationError(gettext("Choose at least one day of the week."))
    if not 1 <= int(day_of_month) <= 31:
        raise ValidationError(gettext("Choose a day of the month from 1 to 31."))
    schedule = Schedule.objects.filter(conversation=conversation).first() or Schedule(conversation=conversation)
    schedule.question = question
    schedule.frequency = frequency
    schedule.weekdays = weekdays
    schedule.day_of_month = int(day_of_month)
    schedule.time = at
    schedule.time_zone = time_zone_check(time_zone)
    schedule.allowed_tools = sorted(set(allowed_tools))
    schedule.next_run_at = schedule_next(schedule=schedule, after=timezone.now())
    schedule.paused_at, schedule.pause_reason, schedule.failures, schedule.last_error = None, "", 0, ""
    schedule.save()
    return schedule


def schedule_pause(*, schedule: Schedule, reason: str) -> Schedule:
    schedule.paused_at, schedule.pause_reason, schedule.next_run_at = timezone.now(), reason, None
    schedule.save(update_fields=["paused_at", "pause_reason", "next_run_at", "updated_at"])
    return schedule


def schedule_resume(*, schedule: Schedule) -> Schedule:
    schedule.paused_at, schedule.pause_reason, schedule.failures = None, "", 0
    schedule.next_run_at = schedule_next(schedule=schedule, after=timezone.now())
    schedule.save(update_fields=["paused_at", "pause_reason", "failures", "next_run_at", "updated_at"])
    return schedule


def schedule_delete(*, schedule: Schedule) -> None:
    schedule.delete()


def schedules_run_due(*, now: datetime | None = None) -> int:
    """Start the turn of each schedule that is due; the number started. Called
    by django-q2's scheduler every minute, in whichever worker it runs."""
    now = now or timezone.now()
    started = 0
    due = Schedule.objects.filter(paused_at__isnull=True, next_run_at__lte=now).order_by("next_run_at", "pk")
    for schedule in due.select_related("conversation")[:SWEEP_LIMIT]:
        try:
            following = schedule_next(schedule=schedule, after=max(now, schedule.next_run_at))
        except ValidationError as error:
            # Changed by hand to never run: paused, saying why, rather than failing every sweep.
            schedule_pause(schedule=schedule, reason=" ".join(error.messages))
            continue
        # The claim: only the sweep that moves the next run on starts the turn.
        claimed = Schedule.objects.filter(
            pk=schedule.pk, next_run_at=schedule.next_run_at, paused_at__isnull=True
        ).update(next_run_at=following, last_run_at=now)
        if not claimed:
            continue
        schedule.next_run_at, schedule.last_run_at = following, now
        try:
            message_post(conversation=schedule.conversation, content=schedule.question, schedule=schedule)
        except ValidationError as error:
            # Another turn still running here, or the owner's budget spent for today.
            schedule_failed(schedule=schedule, error=" ".join(error.messages))
            continue
        started += 1
    return started


def schedule_failed(*, schedule: Schedule, error: str) -> Schedule:
    """Count a failure: the schedule tries again after a wait that grows, and
    pauses, saying why, at the MAX_FAILURES-th in a row."""
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().get(pk=schedule.pk)
        schedule.failures += 1
        schedule.last_error = error
        if schedule.failures >= MAX_FAILURES:
            schedule.paused_at = timezone.now()
            schedule.next_run_at = None
            schedule.pause_reason = gettext("Paused after %(count)s failed runs in a row. The last: %(error)s") % {
                "count": schedule.failures,
                "error": error,
            }
        else:
            retry = timezone.now() + BACKOFF[schedule.failures - 1]
            if schedule.next_run_at is None or retry < schedule.next_run_at:
                schedule.next_run_at = retry
        schedule.save()
    logger.warning("Schedule %s failed (%s in a row): %s", schedule.pk, schedule.failures, error)
    return schedule


def schedule_run_ended(*, run: Run) -> None:
    """A scheduled turn ended: a completed one clears the failures and is told
    to the readers of its conversation's project; a failed one counts; one
    stopped by its owner does neither."""
    schedule = Schedule.objects.filter(pk=run.schedule_id).first()
    if schedule is None:
        return
    if run.status == Run.Status.COMPLETED:
        Schedule.objects.filter(pk=schedule.pk).update(failures=0, last_error="")
        # The owner's list marks it as any turn of theirs; the project's readers are told too.
        project_id = Conversation.objects.filter(pk=run.message.conversation_id).values_list("project_id", flat=True)[0]
        if project_id is not None:
            notices_send(run=run, user_ids=project_member_ids(project_id=project_id))
    elif run.status == Run.Status.FAILED:
        # A turn its owner stopped is their choice, not a failure of the schedule.
        schedule_failed(schedule=schedule, error=run.error or gettext("The turn failed."))
