import pytest
from django.core.management import call_command
from django_q.models import Schedule

from agents.apps import SWEEP_SCHEDULE

pytestmark = pytest.mark.django_db


def test_migrate_schedules_the_sweep_once():
    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    schedule = Schedule.objects.get(name=SWEEP_SCHEDULE)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == ("agents.tasks.runs_sweep", Schedule.MINUTES, 1)
