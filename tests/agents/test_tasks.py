import pytest
from django.core.management import call_command
from django_q.models import Schedule

from agents.apps import RETENTION_SCHEDULE, SWEEP_SCHEDULE

pytestmark = pytest.mark.django_db


def test_migrate_schedules_the_sweep_once():
    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    schedule = Schedule.objects.get(name=SWEEP_SCHEDULE)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == ("agents.tasks.runs_sweep", Schedule.MINUTES, 1)


def test_migrate_schedules_retention_once():
    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    schedule = Schedule.objects.get(name=RETENTION_SCHEDULE)
    assert (schedule.func, schedule.schedule_type, schedule.minutes, schedule.repeats) == (
        "agents.tasks.retention_sweep",
        Schedule.MINUTES,
        5,
        -1,
    )
