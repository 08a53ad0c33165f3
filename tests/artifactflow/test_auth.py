"""Sign-in throttling (django-axes) on the portal's and the admin's sign-in pages."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.db.models import F
from django.urls import reverse

from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def _sign_in(client, url, username, password, address="203.0.113.7"):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.fixture(params=["login", "admin:login"])
def sign_in_url(request):
    return reverse(request.param)


@pytest.fixture
def staff(db):
    return UserFactory(is_staff=True)


def _signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_25_wrong_passwords_lock_the_account_until_the_lockout_passes(client, sign_in_url, staff, settings):
    for _ in range(25):
        response = _sign_in(client, sign_in_url, staff.username, "wrong")
    assert response.status_code == 429
    assert "Sign-in locked" in response.content.decode()

    response = _sign_in(client, sign_in_url, staff.username, PASSWORD)
    assert response.status_code == 429 and not _signed_in(client)

    # The lockout passes: sign-in works again.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))
    response = _sign_in(client, sign_in_url, staff.username, PASSWORD)
    assert response.status_code == 302 and _signed_in(client)


def test_a_locked_username_is_locked_from_every_address_and_the_address_for_every_username(client, staff, settings):
    other = UserFactory()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(client, reverse("login"), staff.username, "wrong", address="203.0.113.7")

    assert _sign_in(client, reverse("login"), staff.username, PASSWORD, address="198.51.100.9").status_code == 429
    assert _sign_in(client, reverse("login"), other.username, PASSWORD, address="203.0.113.7").status_code == 429
    assert _sign_in(client, reverse("login"), other.username, PASSWORD, address="198.51.100.9").status_code == 302


def test_the_lockout_page_says_how_long_and_who_can_unlock(client, staff, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = _sign_in(client, reverse("login"), staff.username, "wrong")
    html = response.content.decode()
    assert f"Too many wrong passwords for “{staff.username}”: signing in is locked for 15 minutes." in html
    assert "An administrator can unlock it sooner." in html


def test_a_right_password_before_the_limit_clears_the_count(client, staff, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _sign_in(client, reverse("login"), staff.username, "wrong")
    assert _sign_in(client, reverse("login"), staff.username, PASSWORD).status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _sign_in(client, reverse("login"), staff.username, "wrong")
    assert _sign_in(client, reverse("login"), staff.username, PASSWORD).status_code == 302


def test_an_administrator_unlocks_a_username_as_the_readme_says(client, staff, settings):
    for _ in range(25):
        _sign_in(client, reverse("login"), staff.username, "wrong")

    call_command("axes_reset_username", staff.username, verbosity=0)

    assert _sign_in(client, reverse("login"), staff.username, PASSWORD).status_code == 302
