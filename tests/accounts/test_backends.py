import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from accounts.backends import StaffPasswordBackend


@pytest.fixture
def passwords_for_staff(settings):
    """SSO on, with ARTIFACTFLOW_LOCAL_PASSWORDS=staff."""
    settings.SSO_ENABLED = True
    settings.OIDC_ISSUER = "https://id.example.com"
    settings.LOCAL_PASSWORDS = "staff"
    settings.SSO_BUTTON_LABEL = "Sign in with Example ID"
    settings.AUTHENTICATION_BACKENDS = [
        "axes.backends.AxesStandaloneBackend",
        "accounts.backends.StaffPasswordBackend",
        "accounts.oidc.SsoBackend",
    ]


@pytest.mark.django_db
def test_staff_password_backend_refuses_non_staff():
    User.objects.create_user("ada", password="pw-ada-123")
    User.objects.create_user("root", password="pw-root-123", is_staff=True)
    backend = StaffPasswordBackend()
    assert backend.authenticate(None, username="ada", password="pw-ada-123") is None
    assert backend.authenticate(None, username="root", password="pw-root-123").username == "root"


@pytest.mark.django_db
def test_login_page_offers_only_the_sso_button_when_passwords_are_for_staff(client, passwords_for_staff):
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with Example ID" in page
    assert f'href="{reverse("oidc_authentication_init")}"' in page
    assert 'name="password"' not in page
    assert f'href="{reverse("admin:login")}"' in page


@pytest.mark.django_db
def test_password_sign_in_of_non_staff_is_refused_and_staff_still_signs_in(client, passwords_for_staff):
    User.objects.create_user("ada", password="pw-ada-123")
    User.objects.create_user("root", password="pw-root-123", is_staff=True)
    refused = client.post(reverse("login"), {"username": "ada", "password": "pw-ada-123"})
    assert refused.status_code == 200
    assert "_auth_user_id" not in client.session
    signed_in = client.post(reverse("admin:login"), {"username": "root", "password": "pw-root-123"})
    assert signed_in.status_code == 302
    assert "_auth_user_id" in client.session


@pytest.mark.django_db
def test_a_non_staff_password_session_ends_when_passwords_are_for_staff(client, settings):
    user = User.objects.create_user("ada", password="pw-ada-123")
    client.force_login(user, backend="accounts.backends.StaffPasswordBackend")
    settings.AUTHENTICATION_BACKENDS = ["accounts.backends.StaffPasswordBackend"]
    assert client.get(reverse("chat")).status_code == 302


@pytest.mark.django_db
def test_login_page_offers_both_with_sso_and_passwords(client, settings):
    settings.SSO_ENABLED = True
    page = client.get(reverse("login") + "?next=/library/", headers={"accept-language": "zh-hans"}).content.decode()
    assert "使用单点登录" in page
    assert f'href="{reverse("oidc_authentication_init")}?next=/library/"' in page
    assert 'name="password"' in page


@pytest.mark.django_db
def test_a_single_sign_on_user_has_no_password_to_change(client):
    user = User.objects.create_user("ada")
    client.force_login(user)
    page = client.get(reverse("settings"), headers={"accept-language": "zh-hans"}).content.decode()
    assert "settings-password" in page
    assert 'name="old_password"' not in page
    assert "你通过单点登录进入" in page
    data = {"form": "password", "old_password": "", "new_password1": "n3w-Passw0rd!", "new_password2": "n3w-Passw0rd!"}
    assert client.post(reverse("settings"), data).status_code == 400
    user.refresh_from_db()
    assert not user.has_usable_password()
