"""Admission (agents.services.admission): at most ARTIFACTFLOW_TURNS_PER_USER
turns of a user hold a worker, the rest wait in order and are told their
place."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ

from agents.models import Run, RunEvent
from agents.selectors import run_views
from agents.services.admission import user_lock
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer, permissions_expire
from agents.services.recovery import run_recover_dead, runs_sweep
from agents.services.runs import run_cancel
from agents.state import TURN, pending_request
from conversations import lifecycle
from tests import waits
from tests.agents.test_engine import call
from tests.factories import ConversationFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db

LIMIT = 3


@pytest.fixture(autouse=True)
def turns_per_user(settings):
    settings.TURNS_PER_USER = LIMIT


def _ask(user, content="What is WAL?") -> Run:
    """A question in a new conversation, its task enqueued as a web request's would be."""
    return lifecycle.conversation_start(user=user, content=content).active_branch.runs.get()


def _enqueued() -> list[int]:
    """The run ids of the tasks in django-q2's queue, in the order they were enqueued."""
    return [task.task["args"][0] for task in OrmQ.objects.order_by("id")]


def _admitted(user) -> int:
    return Run.objects.filter(message__conversation__owner=user, status__in=Run.ADMITTED_STATUSES).count()


def _activity(run) -> str:
    run.refresh_from_db()
    return run_views(runs=[run])[run.pk].activity


def test_one_users_forty_turns_leave_another_users_turn_next_after_their_limit(
    user, other_user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        flood = [_ask(user, f"Question {number}") for number in range(40)]
        other = _ask(other_user)

    other.refresh_from_db()
    assert other.status == Run.Status.QUEUED
    # The other user's turn is enqueued right after the first user's three, not after forty.
    assert _enqueued() == [run.pk for run in flood[:LIMIT]] + [other.pk]
    assert _admitted(user) == LIMIT
    waiting = Run.objects.filter(status=Run.Status.WAITING_SLOT)
    assert set(waiting.values_list("pk", flat=True)) == {run.pk for run in flood[LIMIT:]}
    assert _activity(flood[LIMIT]) == "Queued — next in line"
    assert _activity(flood[-1]) == "Queued — 36 ahead of you"


def test_when_a_turn_ends_the_next_waiting_one_is_admitted_and_the_rest_move_up(
    user, scripted_model, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        runs = [_ask(user, f"Question {number}") for number in range(LIMIT + 3)]
    scripted_model.add(Text("The first answer."))

    with django_capture_on_commit_callbacks(execute=True):
        run_execute(run_id=runs[0].pk)

    runs[0].refresh_from_db()
    runs[LIMIT].refresh_from_db()
    assert runs[0].status == Run.Status.COMPLETED
    assert runs[LIMIT].status == Run.Status.QUEUED
    assert _enqueued() == [run.pk for run in runs[: LIMIT + 1]]
    assert _activity(runs[LIMIT]) == "Queued"
    assert _activity(runs[LIMIT + 1]) == "Queued — next in line"
    assert _activity(runs[LIMIT + 2]) == "Queued — 1 ahead of you"
    # Told its place once when it began to wait and once when it moved up.
    places = runs[LIMIT + 2].events.filter(type=RunEvent.Type.METADATA).values_list("data__ahead", flat=True)
    assert list(places) == [2, 1]


def test_a_user_never_has_more_than_the_limit_admitted_while_their_turns_run_one_by_one(
    user, scripted_model, django_capture_on_commit_callbacks
):
    count = LIMIT + 4
    with django_capture_on_commit_callbacks(execute=True):
        runs = [_ask(user, f"Question {number}") for number in range(count)]
    scripted_model.add(*(Text(f"Answer {number}.") for number in range(count)))
    done = 0
    while done < count:
        assert _admitted(user) <= LIMIT
        queued = Run.objects.filter(status=Run.Status.QUEUED).first()
        with django_capture_on_commit_callbacks(execute=True):
            run_execute(run_id=queued.pk)
        done += 1
    assert set(Run.objects.values_list("status", flat=True)) == {Run.Status.COMPLETED}
    # Each run was enqueued once, in the order it was asked.
    assert _enqueued() == [run.pk for run in runs]


def test_a_turn_paused_for_permission_frees_its_slot_and_waits_for_one_to_go_on(
    user, scripted_model, settings, django_capture_on_commit_callbacks
):
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="draft")),
        Text(call("rewrite_artifact", id="notes", content="final")),
    )
    with django_capture_on_commit_callbacks(execute=True):
        runs = [_ask(user, f"Question {number}") for number in range(LIMIT + 1)]
        run_execute(run_id=runs[0].pk)
    runs[0].refresh_from_db()
    assert runs[0].status == Run.Status.WAITING_PERMISSION
    runs[LIMIT].refresh_from_db()
    assert runs[LIMIT].status == Run.Status.QUEUED

    request_id = pending_request(runs[0].checkpoint).id
    with django_capture_on_commit_callbacks(execute=True):
        permission_answer(run_id=runs[0].pk, user=user, request_id=request_id, decision="deny")

    # Its user's slots are all taken: it waits, first in line, with no task.
    runs[0].refresh_from_db()
    assert runs[0].status == Run.Status.WAITING_SLOT
    assert _enqueued() == [run.pk for run in runs]
    assert _activity(runs[0]) == "Queued — next in line"

    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run_id=runs[1].pk, user=user)
    runs[0].refresh_from_db()
    assert runs[0].status == Run.Status.QUEUED
    assert OrmQ.objects.order_by("-id").first().task["name"] == f"run-{runs[0].pk}-resume"


def test_a_cancelled_waiting_run_never_starts_and_the_ones_behind_move_up(
    user, scripted_model, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        runs = [_ask(user, f"Question {number}") for number in range(LIMIT + 2)]

    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run_id=runs[LIMIT].pk, user=user)

    runs[LIMIT].refresh_from_db()
    assert runs[LIMIT].status == Run.Status.CANCELLED
    assert run_execute(run_id=runs[LIMIT].pk) is None
    assert scripted_model.requests == []
    assert _activity(runs[LIMIT + 1]) == "Queued — next in line"
    # No slot came free: nothing more was enqueued, the cancelled run never.
    assert _enqueued() == [run.pk for run in runs[:LIMIT]]


def test_the_sweep_admits_what_an_ending_left_waiting_and_enqueues_no_other_waiting_run(
    user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        runs = [_ask(user, f"Question {number}") for number in range(LIMIT + 2)]
        assert runs_sweep()["admitted"] == 0
    assert _enqueued() == [run.pk for run in runs[:LIMIT]]

    # A worker ended a turn and died before it could admit the next.
    Run.objects.filter(pk=runs[0].pk).update(status=Run.Status.COMPLETED)
    with django_capture_on_commit_callbacks(execute=True):
        assert runs_sweep()["admitted"] == 1
    assert _enqueued() == [run.pk for run in runs[: LIMIT + 1]]
    assert Run.objects.get(pk=runs[-1].pk).status == Run.Status.WAITING_SLOT


def test_a_limit_of_zero_admits_every_turn(user, settings, django_capture_on_commit_callbacks):
    settings.TURNS_PER_USER = 0
    with django_capture_on_commit_callbacks(execute=True):
        runs = [_ask(user, f"Question {number}") for number in range(LIMIT + 2)]
    assert _enqueued() == [run.pk for run in runs]


@pytest.mark.django_db(transaction=True)
def test_concurrent_questions_of_one_user_never_admit_past_the_limit(user):
    conversations = [ConversationFactory(owner=user) for _ in range(8)]
    errors = []
    barrier = threading.Barrier(len(conversations))

    def ask(conversation):
        try:
            barrier.wait()
            lifecycle.message_post(conversation=conversation, content="At once?")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=ask, args=(conversation,)) for conversation in conversations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert _admitted(user) == LIMIT
    assert Run.objects.filter(status=Run.Status.WAITING_SLOT).count() == len(conversations) - LIMIT
    assert sorted(_enqueued()) == sorted(Run.objects.filter(status=Run.Status.QUEUED).values_list("pk", flat=True))


def test_another_users_waiting_run_is_not_found_by_cancel(client, user, other_user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        runs = [_ask(user, f"Question {number}") for number in range(LIMIT + 1)]
    client.force_login(other_user)
    for name in ("run-cancel", "run-retry"):
        assert client.post(reverse(name, args=[runs[LIMIT].pk])).status_code == 404
    runs[LIMIT].refresh_from_db()
    assert runs[LIMIT].status == Run.Status.WAITING_SLOT


def _waiting_for_permission(user, scripted_model, settings) -> Run:
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="draft")),
        Text(call("rewrite_artifact", id="notes", content="final")),
    )
    run = _ask(user)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING_PERMISSION
    return run


def _expired(run) -> None:
    run.checkpoint[TURN]["pending"]["expires_at"] = "2000-01-01T00:00:00+00:00"
    run.save(update_fields=["checkpoint"])


def _worker_died_twice(run) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        worker="gone-host:1",
        worker_deaths=1,
        heartbeat_at=timezone.now() - timedelta(days=1),
    )


def _backend_waits_for_a_lock(pid: int) -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


ENDINGS = {
    # What ends or moves on a run and then admits its owner's next turn, each in one transaction.
    "permission answered": (
        None,
        lambda run, user: permission_answer(
            run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="deny"
        ),
    ),
    "permission expired": (_expired, lambda run, user: permissions_expire()),
    "dead worker's run ended": (_worker_died_twice, lambda run, user: run_recover_dead(run_id=run.pk)),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite serialises writers: no row locks to order")
@pytest.mark.parametrize("ending", ENDINGS)
def test_an_ending_locks_the_owner_before_the_run_so_a_staff_cancel_never_deadlocks_with_it(
    user, scripted_model, settings, ending
):
    prepare, end = ENDINGS[ending]
    run = _waiting_for_permission(user, scripted_model, settings)
    if prepare:
        prepare(run)
        run.refresh_from_db()
    started, pid, errors = threading.Event(), [], []

    def ending_thread():
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid.append(cursor.fetchone()[0])
            started.set()
            end(run, user)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    # As runs_cancel_by_staff does: the owner first, then the run.
    with transaction.atomic():
        user_lock(user_id=user.pk)
        thread = threading.Thread(target=ending_thread)
        thread.start()
        assert started.wait(30)
        waits.until(lambda: _backend_waits_for_a_lock(pid[0]), timeout=30)
        try:
            Run.objects.select_for_update().get(pk=run.pk)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
    thread.join(timeout=60)

    assert errors == []
    run.refresh_from_db()
    assert not run.is_active or run.status == Run.Status.QUEUED
