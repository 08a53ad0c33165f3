"""The audit trail in the admin: read-only for every role, filtered, exported
as filtered; and a staff member opening another's conversation or run recorded."""

import csv
import io

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from agents.models import Run
from audit.models import AuditEvent
from audit.services import audit_record
from tests.factories import ConversationFactory, MessageFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def trail(user, other_user):
    audit_record(action=AuditEvent.Action.SIGN_IN, actor=user, address="192.0.2.10")
    audit_record(action=AuditEvent.Action.SIGN_IN_FAILED, actor_name="陌生人", address="192.0.2.66")
    audit_record(action=AuditEvent.Action.EXPORT, actor=other_user, detail={"as": "docx"})
    return AuditEvent.objects.order_by("at", "id")


def test_a_superuser_reads_the_trail_and_can_neither_add_change_nor_delete(staff_client, trail):
    record, count = trail.first(), trail.count()

    listed = staff_client.get(reverse("admin:audit_auditevent_changelist")).content.decode()
    page = staff_client.get(reverse("admin:audit_auditevent_change", args=[record.pk]))

    assert "陌生人" in listed and "192.0.2.66" in listed
    assert reverse("admin:audit_auditevent_add") not in listed
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert staff_client.get(reverse("admin:audit_auditevent_add")).status_code == 403
    assert (
        staff_client.post(reverse("admin:audit_auditevent_delete", args=[record.pk]), {"post": "yes"}).status_code
        == 403
    )
    bulk = staff_client.post(
        reverse("admin:audit_auditevent_changelist"), {"action": "delete_selected", "_selected_action": [record.pk]}
    )
    assert bulk.status_code in (200, 302) and AuditEvent.objects.count() == count


def test_staff_see_the_trail_only_with_the_permission_to_view_it(client, trail):
    staff = UserFactory(is_staff=True)
    client.force_login(staff)
    assert client.get(reverse("admin:audit_auditevent_changelist")).status_code == 403
    assert client.get(reverse("admin:audit_auditevent_export")).status_code == 403

    staff.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    client.force_login(type(staff).objects.get(pk=staff.pk))
    assert client.get(reverse("admin:audit_auditevent_changelist")).status_code == 200


def test_the_csv_holds_the_records_the_list_shows_as_filtered(staff_client, trail, user):
    query = {"action__exact": "sign_in_failed"}

    listed = staff_client.get(reverse("admin:audit_auditevent_changelist"), query).content.decode()
    exported = staff_client.get(reverse("admin:audit_auditevent_export"), query)

    rows = list(csv.reader(io.StringIO(exported.content.decode("utf-8-sig"))))
    assert rows[0][:3] == ["at", "actor_name", "action"]
    assert [row[1:3] for row in rows[1:]] == [["陌生人", "sign_in_failed"]]
    assert "?action__exact=sign_in_failed" in listed
    by_person = staff_client.get(reverse("admin:audit_auditevent_export"), {"actor__id__exact": user.pk})
    assert [row[1] for row in csv.reader(io.StringIO(by_person.content.decode("utf-8-sig")))][1:] == [user.username]


def test_a_staff_member_opening_anothers_conversation_or_run_is_recorded_and_their_own_is_not(staff_client, user):
    conversation = ConversationFactory(owner=user, title="私人研究")
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.COMPLETED)
    staff = staff_client.get(reverse("admin:index")).wsgi_request.user
    own = ConversationFactory(owner=staff)

    staff_client.get(reverse("admin:conversations_conversation_change", args=[conversation.pk]))
    staff_client.get(reverse("admin:agents_run_change", args=[run.pk]))
    staff_client.get(reverse("admin:conversations_conversation_change", args=[own.pk]))

    viewed = AuditEvent.objects.filter(action=AuditEvent.Action.ADMIN_VIEW).order_by("at", "id")
    assert [(r.object_type, r.object_id, r.detail["owner"], r.actor) for r in viewed] == [
        ("conversations.conversation", str(conversation.pk), user.username, staff),
        ("agents.run", str(run.pk), user.username, staff),
    ]
