import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_the_demo_login_exists_only_with_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="only for local use"):
        call_command("demo_user")
    assert not get_user_model().objects.exists()


def test_with_debug_it_prints_a_fresh_password_that_signs_in(settings, client):
    settings.DEBUG = True
    out = io.StringIO()
    call_command("demo_user", stdout=out)
    password = out.getvalue().strip().rsplit(" / ", 1)[1]

    response = client.post("/accounts/login/", {"username": "demo", "password": password})

    assert response.status_code == 302 and "_auth_user_id" in client.session
