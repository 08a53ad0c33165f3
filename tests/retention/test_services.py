"""Retention a team sets (retention.services): each policy's dry run says
what it would remove, and applied it removes exactly that, never what is on
hold or in use."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from agents.models import Run, RunEvent
from artifacts.branches import branch_at
from artifacts.models import Artifact
from artifacts.services import artifact_upload
from audit.models import AuditEvent
from audit.services import audit_record
from conversations.models import Conversation
from library.models import WebSnapshot
from library.services import snapshot_keep
from retention.apps import SCHEDULE
from retention.models import RetentionPolicy
from retention.services import policies_apply, retention_plan
from tests.factories import ConversationFactory, MessageFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db

Kind = RetentionPolicy.Kind
ANSWER = "热泵在寒冷地区仍然高效。"  # 12 characters, 36 bytes


def _aged(conversation, *, days: int):
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now() - timedelta(days=days))
    return conversation


def _policy(kind: str, *, days: int, enabled: bool = True) -> RetentionPolicy:
    RetentionPolicy.objects.filter(kind=kind).update(days=days, enabled=enabled)
    return RetentionPolicy.objects.get(kind=kind)


def _conversation(owner, *, days: int, **fields):
    conversation = ConversationFactory(owner=owner, **fields)
    message = MessageFactory(conversation=conversation, content="问", response=ANSWER)
    RunFactory(message=message, status=Run.Status.COMPLETED)
    return _aged(conversation, days=days)


def test_every_kind_is_there_and_off_and_a_policy_switched_off_removes_nothing(user):
    assert set(RetentionPolicy.objects.values_list("kind", flat=True)) == set(Kind.values)
    assert not RetentionPolicy.objects.filter(enabled=True).exists()
    _conversation(user, days=1000)

    assert policies_apply() == {}
    assert Conversation.objects.count() == 1
    assert Schedule.objects.filter(name=SCHEDULE, func="retention.services.policies_apply").exists()


def test_untouched_conversations_go_as_their_dry_run_said_but_held_recent_and_busy_ones(user):
    old = _conversation(user, days=400)
    _conversation(user, days=400, retention_hold=True)
    _conversation(user, days=10)
    busy = _conversation(user, days=400)
    RunFactory(message=MessageFactory(conversation=busy), status=Run.Status.RUNNING)
    _aged(busy, days=400)
    policy = _policy(Kind.CONVERSATIONS, days=365)

    plan = retention_plan(kind=policy.kind, days=policy.days)
    removed = policies_apply()

    assert (plan.count, plan.bytes) == (1, len("问".encode()) + len(ANSWER.encode()))
    assert removed == {Kind.CONVERSATIONS: 1} and not Conversation.objects.filter(pk=old.pk).exists()
    assert Conversation.objects.count() == 3
    policy.refresh_from_db()
    assert policy.last_report == {"count": 1, "bytes": plan.bytes} and policy.last_run_at is not None


def test_an_uploads_original_goes_and_its_text_stays_but_an_image_and_a_held_conversations_stay(user):
    mine = ConversationFactory(owner=user)
    held = ConversationFactory(owner=user, retention_hold=True)
    branch = branch_at(session=mine.artifact_session, message_id=None)
    read = artifact_upload(branch=branch, filename="笔记.md", data="# 笔记\n\n热泵".encode())
    image = artifact_upload(branch=branch, filename="chart.png", data=b"\x89PNG\r\n\x1a\n" + b"0" * 64)
    kept = artifact_upload(
        branch=branch_at(session=held.artifact_session, message_id=None), filename="held.md", data=b"# held"
    )
    Artifact.objects.update(created_at=timezone.now() - timedelta(days=200))
    storage = Artifact._meta.get_field("file").storage
    name = read.file.name
    _policy(Kind.UPLOADS, days=180)

    plan = retention_plan(kind=Kind.UPLOADS, days=180)
    policies_apply()

    read.refresh_from_db()
    assert (plan.count, plan.bytes) == (1, len("# 笔记\n\n热泵".encode()))
    assert not read.file and "热泵" in read.content and not storage.exists(name)
    assert Artifact.objects.get(pk=image.pk).file and Artifact.objects.get(pk=kept.pk).file


@pytest.mark.events_by_hand
def test_event_logs_of_idle_conversations_go_but_a_held_ones(user):
    idle = _conversation(user, days=100)
    held = _conversation(user, days=100, retention_hold=True)
    for conversation in (idle, held):
        run = Run.objects.get(message__conversation=conversation)
        RunEvent.objects.create(run=run, seq=1, type=RunEvent.Type.METADATA, data={"model": "模型"})
        _aged(conversation, days=100)
    _policy(Kind.EVENTS, days=90)

    assert retention_plan(kind=Kind.EVENTS, days=90).count == 1
    policies_apply()

    assert list(RunEvent.objects.values_list("run__message__conversation", flat=True)) == [held.pk]


def test_snapshots_read_longer_ago_than_the_policy_go_but_a_held_conversations(user):
    recent, held = _conversation(user, days=0), _conversation(user, days=0, retention_hold=True)
    snapshots = [
        snapshot_keep(conversation_id=conversation.pk, url=url, title="", content_type="text/plain", text=ANSWER)
        for conversation, url in [
            (recent, "https://a.example/old"),
            (recent, "https://a.example/new"),
            (held, "https://a.example/old"),
        ]
    ]
    WebSnapshot.objects.filter(url="https://a.example/old").update(fetched_at=timezone.now() - timedelta(days=200))
    policy = _policy(Kind.SNAPSHOTS, days=180)

    plan = retention_plan(kind=policy.kind, days=policy.days)
    removed = policies_apply()

    assert (plan.count, plan.bytes) == (1, len(ANSWER.encode()))
    assert removed == {Kind.SNAPSHOTS: 1}
    assert set(WebSnapshot.objects.values_list("pk", flat=True)) == {snapshots[1].pk, snapshots[2].pk}
    # The conversation stays; its link to the page opens the live page now.
    assert Conversation.objects.filter(pk=recent.pk).exists()


def test_audit_records_older_than_the_policy_go(db):
    AuditEvent.objects.create(action=AuditEvent.Action.EXPORT, at=timezone.now() - timedelta(days=800))
    recent = audit_record(action=AuditEvent.Action.EXPORT, actor_name="王芳")
    _policy(Kind.AUDIT, days=730)

    assert retention_plan(kind=Kind.AUDIT, days=730).count == 1
    policies_apply()

    assert list(AuditEvent.objects.filter(action="export").values_list("pk", flat=True)) == [recent.pk]


def test_the_conversations_of_people_deactivated_long_enough_go(db):
    gone, recent, active = UserFactory(username="离职者"), UserFactory(), UserFactory()
    for person, days in ((gone, 40), (recent, 5)):
        person.is_active = False
        person.save()
        # Dated as long ago as the test needs: the save's own record is of now.
        change = AuditEvent.objects.filter(object_type="auth.user", object_id=str(person.pk), action="change")
        change._raw_delete(AuditEvent.objects.db)
        AuditEvent.objects.create(
            action=AuditEvent.Action.CHANGE,
            object_type="auth.user",
            object_id=str(person.pk),
            changes={"is_active": [True, False]},
            at=timezone.now() - timedelta(days=days),
        )
    for person in (gone, recent, active):
        _conversation(person, days=1)
    _conversation(gone, days=1, retention_hold=True)
    _policy(Kind.PEOPLE, days=30)

    assert retention_plan(kind=Kind.PEOPLE, days=30).count == 1
    policies_apply()

    left = sorted(Conversation.objects.values_list("owner__username", "retention_hold"))
    assert left == sorted([("离职者", True), (recent.username, False), (active.username, False)])
