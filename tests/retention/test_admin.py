"""Retention in the admin: each policy's dry run beside it, switched on by an
administrator (and recorded), and conversations put on hold."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from conversations.models import Conversation
from retention.models import RetentionPolicy
from tests.factories import ConversationFactory, MessageFactory

pytestmark = pytest.mark.django_db


def test_each_policy_shows_what_it_would_remove_before_it_is_switched_on(staff_client, user):
    old = ConversationFactory(owner=user)
    MessageFactory(conversation=old, content="问题", response="答案" * 500)
    Conversation.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(days=400))
    policy = RetentionPolicy.objects.get(kind=RetentionPolicy.Kind.CONVERSATIONS)

    listed = staff_client.get(reverse("admin:retention_retentionpolicy_changelist")).content.decode()
    page = staff_client.get(reverse("admin:retention_retentionpolicy_change", args=[policy.pk])).content.decode()
    saved = staff_client.post(
        reverse("admin:retention_retentionpolicy_change", args=[policy.pk]), {"days": "200", "enabled": "on"}
    )

    # 6 bytes of question and 3,000 of answer.
    assert "1 (2.9\xa0KB)" in listed and "1 (2.9\xa0KB)" in page
    assert saved.status_code == 302 and RetentionPolicy.objects.get(pk=policy.pk).enabled
    [change] = AuditEvent.objects.filter(object_type="retention.retentionpolicy", action="change")
    assert change.changes == {"days": [365, 200], "enabled": [False, True]}
    assert staff_client.get(reverse("admin:retention_retentionpolicy_add")).status_code == 403
    delete = reverse("admin:retention_retentionpolicy_delete", args=[policy.pk])
    assert staff_client.post(delete, {"post": "yes"}).status_code == 403


def test_conversations_are_put_on_hold_and_released_and_each_is_recorded(staff_client, user):
    first, second = ConversationFactory(owner=user, title="合同"), ConversationFactory(owner=user)
    changelist = reverse("admin:conversations_conversation_changelist")

    staff_client.post(changelist, {"action": "holds_put", "_selected_action": [first.pk, second.pk]})
    staff_client.post(changelist, {"action": "holds_release", "_selected_action": [second.pk]})

    assert list(Conversation.objects.filter(retention_hold=True)) == [first]
    holds = AuditEvent.objects.filter(object_type="conversations.conversation").order_by("at", "id")
    records = [(r.object_id, r.changes["retention_hold"]) for r in holds]
    assert sorted(records[:2]) == sorted([(str(first.pk), [False, True]), (str(second.pk), [False, True])])
    assert records[2:] == [(str(second.pk), [True, False])]
