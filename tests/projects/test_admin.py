"""Schedules in the admin: a change by hand is checked as the portal checks
one, and moves the next run to the new times."""

from datetime import time, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from projects.models import Schedule
from tests.factories import ConversationFactory, ScheduleFactory

pytestmark = pytest.mark.django_db


def _form(schedule, **changes) -> dict:
    return {
        "question": schedule.question,
        "frequency": schedule.frequency,
        "weekdays": "[]",
        "day_of_month": "1",
        "time": "06:15",
        "time_zone": "Asia/Shanghai",
        "allowed_tools": "[]",
        "paused_at_0": "",
        "paused_at_1": "",
        "pause_reason": "",
        **changes,
    }


def test_a_schedule_changed_in_the_admin_runs_next_by_its_new_time(admin_client):
    schedule = ScheduleFactory(conversation=ConversationFactory(), next_run_at=timezone.now() + timedelta(days=20))
    url = reverse("admin:projects_schedule_change", args=[schedule.pk])

    response = admin_client.post(url, _form(schedule, frequency="daily"))

    assert response.status_code == 302, response.content.decode()[:2000]
    schedule.refresh_from_db()
    assert schedule.time == time(6, 15)
    assert timezone.now() < schedule.next_run_at <= timezone.now() + timedelta(days=1)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"time_zone": "Mars/Olympus"}, "Not a time zone."),
        ({"frequency": "weekly", "weekdays": "[]"}, "Choose at least one day of the week."),
    ],
)
def test_a_schedule_that_cannot_run_is_refused_in_the_admin(admin_client, changes, error):
    schedule = ScheduleFactory(conversation=ConversationFactory())
    before = Schedule.objects.filter(pk=schedule.pk).values().get()

    response = admin_client.post(
        reverse("admin:projects_schedule_change", args=[schedule.pk]), _form(schedule, **changes)
    )

    assert response.status_code == 200 and error in response.content.decode()
    assert Schedule.objects.filter(pk=schedule.pk).values().get() == before
