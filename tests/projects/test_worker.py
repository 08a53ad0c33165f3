"""A schedule fired through real django-q2 clusters on the test database, with
the scripted model over HTTP: its turns run unattended, the second answer says
what changed since the first, and two workers sweeping at once start one turn.

django-q2's scheduler calls the sweep at most every 30 s of a cluster's life;
the tests hand the cluster the task its schedule names at once instead."""

import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule as QSchedule
from django_q.models import Task
from django_q.tasks import async_task

from agents.models import Run
from projects.models import Schedule
from projects.schedules import SCHEDULE_NAME
from tests import waits
from tests.agents.test_engine import call
from tests.factories import ConversationFactory, ScheduleFactory
from tests.model_server import Text
from tests.processes import Cluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

REPORT = "# 热泵市场周报\n\n## 价格\n\n主流机型售价约12万元。\n\n## 销量\n\n本月销量1,200台。\n"


@pytest.fixture
def clusters(scripted_model, tmp_path):
    started = []

    def start() -> Cluster:
        cluster = Cluster(
            model_url=scripted_model.url, model=scripted_model.model, log=tmp_path / f"qcluster-{len(started)}.log"
        )
        started.append(cluster.start())
        return cluster

    yield start
    for cluster in started:
        cluster.kill()


def _until(condition, *, clusters, timeout=30):
    deadline = time.monotonic() + waits.seconds(timeout)
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {waits.seconds(timeout)} s\n" + "\n".join(c.log_tail() for c in clusters))
        time.sleep(0.05)


def _sweep() -> str:
    """The task django-q2's schedule runs every minute, handed to the clusters now."""
    func = QSchedule.objects.get(name=SCHEDULE_NAME).func
    return async_task(func, task_name=f"sweep-{uuid.uuid4().hex[:8]}")


def _due(schedule) -> None:
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - timedelta(minutes=1))


def _completed(schedule) -> list[Run]:
    return list(Run.objects.filter(schedule=schedule, status=Run.Status.COMPLETED).order_by("pk"))


def test_a_schedule_fired_twice_by_a_worker_says_the_second_time_what_changed(user, scripted_model, clusters):
    schedule = ScheduleFactory(conversation=ConversationFactory(owner=user), question="How did heat pump prices move?")
    scripted_model.add(
        Text(call("create_artifact", id="report", title="热泵市场周报", content=REPORT)),
        Text("The report is written."),
        Text(call("update_artifact", id="report", old_str="约12万元", new_str="约15万元")),
        Text("Prices rose."),
    )
    cluster = clusters()

    _sweep()
    _until(lambda: len(_completed(schedule)) == 1, clusters=[cluster])
    _due(schedule)
    _sweep()
    _until(lambda: len(_completed(schedule)) == 2, clusters=[cluster])

    first, second = (run.message for run in _completed(schedule))
    assert first.content == second.content == "How did heat pump prices move?"
    assert second.parent_id == first.pk
    assert first.response.startswith("**What changed since this research was last asked**")
    assert second.response.startswith("**What changed since the last run (")
    assert "section “价格” changed (figures: 12万 → 15万)" in second.response
    assert second.response.endswith("Prices rose.")
    schedule.refresh_from_db()
    assert schedule.failures == 0 and schedule.next_run_at > timezone.now()
    assert len(scripted_model.requests) == 4


def test_two_workers_sweeping_at_once_start_the_schedules_turn_once(user, scripted_model, clusters):
    schedule = ScheduleFactory(conversation=ConversationFactory(owner=user))
    scripted_model.add(Text("Once."), Text("A second turn the schedule must not start."))
    started = [clusters(), clusters()]

    sweeps = [_sweep(), _sweep()]
    _until(lambda: Task.objects.filter(id__in=sweeps, success=True).count() == 2, clusters=started)
    _until(lambda: len(_completed(schedule)) == 1, clusters=started)

    assert sorted(Task.objects.filter(id__in=sweeps).values_list("result", flat=True)) == [0, 1]
    assert Run.objects.filter(schedule=schedule).count() == 1
    assert _completed(schedule)[0].message.response.endswith("Once.")
    assert len(scripted_model.requests) == 1
