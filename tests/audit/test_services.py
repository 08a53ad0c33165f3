"""The audit trail's records of changes (audit.services): whoever makes them,
before and after, never a secret, append-only."""

import datetime
import re

import lxml.html
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from agents.models import HttpTool, TokenBudget
from audit.models import AppendOnly, AuditEvent
from audit.services import SECRET, audit_context, audit_prune, audit_record
from tests.agents.tools.test_http import make_tool
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _records(**filters):
    return list(AuditEvent.objects.filter(**filters).order_by("at", "id"))


def _admin_post(client, url: str, values: dict):
    """The admin's form at `url` posted as the page has it, with `values` in place, from 203.0.113.9."""
    page = client.get(url)
    form = {}
    for name, value in lxml.html.fromstring(page.content.decode()).get_element_by_id("user_form").form_values():
        form.setdefault(name, []).append(value)
    form.update({name: [value] for name, value in values.items()})
    return client.post(url, form, REMOTE_ADDR="203.0.113.9")


def test_a_user_added_and_made_staff_in_the_admin_is_recorded_before_and_after_without_the_password(client):
    admin_user = UserFactory(username="管理员", is_staff=True, is_superuser=True)
    team = Group.objects.create(name="研究组")
    client.force_login(admin_user)

    added = _admin_post(
        client,
        reverse("admin:auth_user_add"),
        {"username": "新人", "password1": "a long pass phrase 42", "password2": "a long pass phrase 42"},
    )
    assert added.status_code == 302
    person = get_user_model().objects.get(username="新人")
    changed = _admin_post(
        client, reverse("admin:auth_user_change", args=[person.pk]), {"is_staff": "on", "groups": str(team.pk)}
    )
    assert changed.status_code == 302, re.findall(r"errorlist[^>]*>(.*?)</ul>", changed.content.decode(), re.S)

    created, *changes = _records(object_type="auth.user", object_id=str(person.pk))
    assert (created.action, created.actor, created.actor_name, created.address) == (
        AuditEvent.Action.CREATE,
        admin_user,
        "管理员",
        "203.0.113.9",
    )
    assert created.changes["username"] == [None, "新人"] and created.changes["password"] == [None, SECRET]
    fields = {name: change for record in changes for name, change in record.changes.items()}
    assert fields["is_staff"] == [False, True] and fields["groups"] == [[], ["研究组"]]
    assert "pbkdf2" not in str([record.changes for record in _records()])


def test_membership_changed_from_the_groups_side_is_recorded_on_each_person(db):
    ana, bo = UserFactory(username="ana"), UserFactory(username="bo")
    team = Group.objects.create(name="team")

    with audit_context(user=ana, address="198.51.100.4"):
        team.user_set.add(ana, bo)
        team.user_set.remove(bo)

    bo_records = _records(object_type="auth.user", object_id=str(bo.pk), action=AuditEvent.Action.CHANGE)
    assert [record.changes["groups"] for record in bo_records] == [[[], ["team"]], [["team"], []]]
    assert {record.actor for record in bo_records} == {ana}


def test_a_budget_change_and_a_tools_secret_are_recorded_the_secret_only_as_changed(db):
    person = UserFactory(username="王芳")
    budget = TokenBudget.objects.create(user=person, daily_tokens=100_000)
    budget.daily_tokens = 250_000
    budget.save()
    tool = make_tool("http://127.0.0.1:9", secret="Bearer s3cr3t-value")
    tool.secret_set("Bearer another-s3cr3t")
    tool.save()
    tool.delete()

    [_, changed] = _records(object_type="agents.tokenbudget")
    assert changed.changes == {"daily_tokens": [100_000, 250_000]} and changed.actor is None
    tool_records = _records(object_type="agents.httptool")
    assert [record.action for record in tool_records] == ["create", "change", "delete"]
    assert tool_records[1].changes["secret_encrypted"] == [SECRET, SECRET]
    assert "s3cr3t" not in str([record.changes for record in tool_records])
    assert not HttpTool.objects.exists()


def test_a_change_rolled_back_leaves_no_record(db):
    group = Group.objects.create(name="before")

    with pytest.raises(RuntimeError), transaction.atomic():
        group.name = "after"
        group.save()
        raise RuntimeError("the admin's save failed later")

    assert [record.action for record in _records(object_type="auth.group")] == ["create"]


def test_records_are_never_changed_or_deleted_and_retention_removes_only_the_old(db):
    old = audit_record(action=AuditEvent.Action.EXPORT, actor_name="someone")
    AuditEvent.objects.filter(pk=old.pk)._raw_delete(AuditEvent.objects.db)
    old = AuditEvent.objects.create(at=timezone.now() - datetime.timedelta(days=400), action="export")
    new = audit_record(action=AuditEvent.Action.EXPORT, actor_name="someone")

    new.actor_name = "someone else"
    with pytest.raises(AppendOnly):
        new.save()
    with pytest.raises(AppendOnly):
        new.delete()
    with pytest.raises(AppendOnly):
        AuditEvent.objects.filter(pk=new.pk).update(actor_name="x")
    with pytest.raises(AppendOnly):
        AuditEvent.objects.all().delete()

    assert audit_prune(before=timezone.now() - datetime.timedelta(days=365)) == 1
    assert list(AuditEvent.objects.filter(action="export").values_list("pk", flat=True)) == [new.pk]
