"""Sign-ins, failed sign-ins and sign-outs in the audit trail, with the address."""

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def test_a_sign_in_a_failed_one_and_a_sign_out_are_recorded_with_the_address(client):
    person = UserFactory(username="李雷")

    client.post(reverse("login"), {"username": "李雷", "password": "wrong"}, REMOTE_ADDR="198.51.100.7")
    client.post(reverse("login"), {"username": "李雷", "password": PASSWORD}, REMOTE_ADDR="198.51.100.7")
    client.post(reverse("logout"), REMOTE_ADDR="198.51.100.8")

    signs = AuditEvent.objects.filter(action__startswith="sign_").order_by("at", "id")
    records = list(signs.values_list("action", "actor", "actor_name", "address"))
    assert records == [
        ("sign_in_failed", None, "李雷", "198.51.100.7"),
        ("sign_in", person.pk, "李雷", "198.51.100.7"),
        ("sign_out", person.pk, "李雷", "198.51.100.8"),
    ]
    assert AuditEvent.objects.get(action="sign_in").detail == {"by": "password"}
    assert "wrong" not in str(list(AuditEvent.objects.values()))


def test_a_failed_sign_in_with_a_name_nobody_has_is_recorded_by_that_name(client):
    client.post(reverse("login"), {"username": "<script>nobody", "password": "x"}, REMOTE_ADDR="192.0.2.1")

    record = AuditEvent.objects.get(action__startswith="sign_")
    assert (record.action, record.actor, record.actor_name) == ("sign_in_failed", None, "<script>nobody")
