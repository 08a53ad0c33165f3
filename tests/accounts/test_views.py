import lxml.html
import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from accounts.models import UserPreference
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def _menu(html: str):
    """The language menu of a page: where it posts, and the language it shows as chosen."""
    root = lxml.html.fromstring(html)
    [form] = root.xpath("//form[@class='language']")
    return form.get("action"), form.xpath(".//option[@selected]/@value"), root.get("lang")


def _sign_in(client, user, **headers):
    """Through the sign-in form, as a person does: a new session."""
    response = client.post(reverse("login"), {"username": user.username, "password": PASSWORD}, **headers)
    assert response.status_code == 302


def test_the_header_offers_the_language_menu_to_signed_in_and_anonymous_people(client, user):
    action, chosen, lang = _menu(client.get(reverse("login")).content.decode())
    assert (action, chosen, lang) == (reverse("language-set"), ["en"], "en")

    client.force_login(user)
    action, chosen, lang = _menu(client.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode())
    assert (action, chosen, lang) == (reverse("language-set"), ["zh-hans"], "zh-hans")


def test_a_signed_in_users_choice_is_kept_on_the_user_and_beats_the_browser(client, user):
    _sign_in(client, user)
    response = client.post(reverse("language-set"), {"language": "zh-hans", "next": reverse("chat")})

    assert response.status_code == 302 and response.url == reverse("chat")
    assert UserPreference.objects.get(user=user).language == "zh-hans"
    page = client.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "新对话" in page and "New conversation" not in page

    # Another browser, asking for English, with no cookie: a new session still speaks Chinese.
    elsewhere = Client()
    _sign_in(elsewhere, user, HTTP_ACCEPT_LANGUAGE="en")
    page = elsewhere.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "新对话" in page and _menu(page)[1:] == (["zh-hans"], "zh-hans")

    # And back to English the same way.
    elsewhere.post(reverse("language-set"), {"language": "en", "next": "/"})
    again = Client()
    _sign_in(again, user, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "New conversation" in again.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()


def test_one_users_choice_is_not_anothers(client, user, other_user):
    UserPreference.objects.create(user=other_user, language="zh-hans")
    _sign_in(client, user)
    assert "New conversation" in client.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en").content.decode()


def test_an_anonymous_choice_on_the_sign_in_page_is_a_cookie(client):
    response = client.post(reverse("language-set"), {"language": "zh-hans", "next": reverse("login")})

    assert response.status_code == 302 and response.url == reverse("login")
    assert client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    page = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "<h1>登录</h1>" in page
    assert not UserPreference.objects.exists()


def test_a_language_the_portal_does_not_speak_changes_nothing(client, user):
    _sign_in(client, user)
    response = client.post(reverse("language-set"), {"language": "fr", "next": "/"})
    assert response.status_code == 400
    assert not UserPreference.objects.exists()
    assert settings.LANGUAGE_COOKIE_NAME not in client.cookies


def test_the_language_post_needs_its_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    _sign_in_with_token(client, user)

    refused = client.post(reverse("language-set"), {"language": "zh-hans", "next": "/"})

    assert refused.status_code == 403
    assert not UserPreference.objects.exists()
    page = client.get(reverse("chat")).content.decode()
    token = lxml.html.fromstring(page).xpath("//form[@class='language']//input[@name='csrfmiddlewaretoken']/@value")
    accepted = client.post(reverse("language-set"), {"language": "zh-hans", "next": "/", "csrfmiddlewaretoken": token})
    assert accepted.status_code == 302
    assert UserPreference.objects.get(user=user).language == "zh-hans"


def _sign_in_with_token(client, user):
    page = client.get(reverse("login")).content.decode()
    [token] = lxml.html.fromstring(page).xpath("//main//input[@name='csrfmiddlewaretoken']/@value")
    data = {"username": user.username, "password": PASSWORD, "csrfmiddlewaretoken": token}
    assert client.post(reverse("login"), data).status_code == 302


NEW_PASSWORD = "热泵-correct-horse-42"


def test_the_top_bar_links_to_the_settings_page(client, user):
    client.force_login(user)

    root = lxml.html.fromstring(client.get(reverse("chat")).content)

    assert root.xpath("//header[@class='topbar']//a/@href").count(reverse("settings")) == 1


def test_the_settings_page_is_for_signed_in_people(client):
    response = client.get(reverse("settings"))

    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_the_old_password_change_urls_lead_to_settings(client, user):
    client.force_login(user)

    for name in ("password_change", "password_change_done"):
        response = client.get(reverse(name))
        assert response.status_code == 302 and response.url == reverse("settings")


def test_a_wrong_old_password_keeps_the_page_with_an_error(client, user):
    _sign_in(client, user)

    response = client.post(
        reverse("settings"),
        {"form": "password", "old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )

    assert response.status_code == 422
    root = lxml.html.fromstring(response.content)
    assert root.xpath("//form[@class='settings-password']//*[@role='alert']")
    user.refresh_from_db()
    assert user.check_password(PASSWORD)


def test_a_password_change_keeps_this_session_signed_in_and_only_this_user_changes(client, user, other_user):
    _sign_in(client, user)
    elsewhere = Client()
    _sign_in(elsewhere, user)

    response = client.post(
        reverse("settings"),
        {"form": "password", "old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
        follow=True,
    )

    assert response.redirect_chain == [(reverse("settings"), 302)]
    assert "Your password was changed." in response.content.decode()
    assert client.get(reverse("chat")).status_code == 200
    # Another session of the user's, signed in with the old password, ends.
    assert elsewhere.get(reverse("chat")).status_code == 302
    user.refresh_from_db()
    other_user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)
    assert other_user.check_password(PASSWORD)


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_a_chosen_theme_is_kept_and_applied_to_every_page(client, user, other_user, theme):
    _sign_in(client, user)

    response = client.post(reverse("settings"), {"form": "theme", "theme": theme})

    assert response.status_code == 302
    assert UserPreference.objects.get(user=user).theme == theme
    root = lxml.html.fromstring(client.get(reverse("chat")).content)
    assert root.get("data-theme") == theme
    assert root.xpath("//meta[@name='color-scheme']/@content") == [theme]
    dark_sheets = root.xpath("//link[contains(@href, 'dark.css')]")
    assert [link.get("media") for link in dark_sheets] == ([None] if theme == "dark" else [])
    # Kept on the user: a new sign-in finds it; another user's pages do not change.
    fresh = Client()
    _sign_in(fresh, user)
    assert lxml.html.fromstring(fresh.get(reverse("chat")).content).get("data-theme") == theme
    other = Client()
    _sign_in(other, other_user)
    other_root = lxml.html.fromstring(other.get(reverse("chat")).content)
    assert other_root.get("data-theme") is None
    assert [link.get("media") for link in other_root.xpath("//link[contains(@href, 'dark.css')]")] == [
        "(prefers-color-scheme: dark)"
    ]


def test_an_unknown_theme_or_form_is_refused(client, user):
    client.force_login(user)

    assert client.post(reverse("settings"), {"form": "theme", "theme": "neon"}).status_code == 400
    assert client.post(reverse("settings"), {"form": "other"}).status_code == 400
    assert not UserPreference.objects.filter(user=user, theme="neon").exists()


def test_the_language_can_be_chosen_on_the_settings_page(client, user):
    _sign_in(client, user)
    page = lxml.html.fromstring(client.get(reverse("settings")).content)
    [form] = page.xpath("//form[@class='settings-language']")
    assert form.get("action") == reverse("language-set")

    response = client.post(reverse("language-set"), {"language": "zh-hans", "next": reverse("settings")})

    assert response.status_code == 302 and response.url == reverse("settings")
    assert lxml.html.fromstring(client.get(reverse("settings")).content).xpath("//h1/text()") == ["设置"]


def test_the_settings_page_opens_at_its_top_not_at_the_password(client, user):
    client.force_login(user)

    page = client.get(reverse("settings")).content.decode()

    assert 'name="old_password"' in page and "autofocus" not in page


def test_the_password_fields_are_described_by_their_help_shown_on_the_page(client, user):
    client.force_login(user)
    page = lxml.html.fromstring(client.get(reverse("settings"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode())

    described = {field.get("name"): field.get("aria-describedby") for field in page.xpath("//input[@aria-describedby]")}
    assert set(described) == {"new_password1", "new_password2"}
    helps = {name: page.get_element_by_id(id_).text_content() for name, id_ in described.items()}
    assert helps["new_password2"] == "为了校验，请输入与上面相同的密码。"
    assert helps["new_password1"]
