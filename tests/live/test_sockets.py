"""What a conversation's websocket reads from its page, and the session it lives by (live.sockets)."""

import json

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.sessions.models import Session
from django.test import Client

from live import sockets
from tests.factories import UserFactory


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"running": [12, 13]}', {12, 13}),
        ('{"running": []}', set()),
        ('{"running": [12, "13", 1.0, true, null, -4, 0, 9223372036854775808], "other": 1}', {12}),
        (json.dumps({"running": list(range(1, 101))}), set(range(1, 21))),
        ('{"running": [Infinity, 12]}', set()),
        ('{"running": [NaN]}', set()),
        ('{"running": [1e999]}', set()),
        ('{"running": [' + "9" * 4000 + "]}", set()),
        ("[" * 4000, set()),
        ('{"running": [1, 2' + ", 3" * 2000 + "]}", set()),
        ('{"running": 12}', set()),
        ('{"running": {"12": 12}}', set()),
        ('[{"running": [12]}]', set()),
        ("not json", set()),
        ("", set()),
        (None, set()),
    ],
)
def test_a_page_names_at_most_twenty_run_ids_and_nothing_else(text, named):
    assert sockets.running_named(text) == named


def test_the_budget_lets_a_burst_through_then_one_message_per_interval(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(sockets.time, "monotonic", lambda: now[0])
    budget = sockets.MessageBudget(burst=3, per_second=2.0)
    assert [budget.take() for _ in range(5)] == [True, True, True, False, False]
    now[0] += 0.5
    assert [budget.take(), budget.take()] == [True, False]
    now[0] += 60
    assert sum(budget.take() for _ in range(10)) == 3


def _session_key(user):
    client = Client()
    client.force_login(user)
    return client.session.session_key


def test_a_session_signs_its_user_in_until_it_ends_or_the_password_changes(db):
    user = UserFactory()
    key = _session_key(user)
    assert sockets.session_signs_in(session_key=key, user_id=user.pk)
    assert not sockets.session_signs_in(session_key=key, user_id=user.pk + 1)
    assert not sockets.session_signs_in(session_key="no-such-session", user_id=user.pk)
    assert not sockets.session_signs_in(session_key=None, user_id=user.pk)
    type(user).objects.filter(pk=user.pk).update(password=make_password("another"))
    assert not sockets.session_signs_in(session_key=key, user_id=user.pk)


def test_an_inactive_user_signs_in_nowhere(db):
    user = UserFactory()
    key = _session_key(user)
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    assert not sockets.session_signs_in(session_key=key, user_id=user.pk)


def test_checking_a_session_changes_nothing_and_honours_fallback_keys(db, settings):
    user = UserFactory()
    key = _session_key(user)
    # The secret key rotated: sessions signed under the old one stay valid.
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-" + "x" * 50
    assert sockets.session_signs_in(session_key=key, user_id=user.pk)
    type(user).objects.filter(pk=user.pk).update(password=make_password("another"))
    assert not sockets.session_signs_in(session_key=key, user_id=user.pk)
    # Not flushed, as get_user would: the page's next request finds it and decides.
    assert Session.objects.filter(session_key=key).exists()


def test_a_session_tag_names_a_session_without_its_key():
    tag = sockets.session_tag("abc123")
    assert tag == sockets.session_tag("abc123") != sockets.session_tag("abc124")
    assert "abc123" not in tag
