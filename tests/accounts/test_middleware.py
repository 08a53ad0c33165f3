import pytest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("accept", "lang", "heading"),
    [
        ("zh-hans", "zh-hans", "登录"),
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh-hans", "登录"),
        ("en-US,en;q=0.9", "en", "Sign in"),
        ("fr-FR,fr;q=0.9", "en", "Sign in"),
        ("", "en", "Sign in"),
    ],
)
def test_the_browsers_accept_language_picks_the_language(client, accept, lang, heading):
    response = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE=accept)

    html = response.content.decode()
    assert f'<html lang="{lang}">' in html
    assert f"<h1>{heading}</h1>" in html
    assert response.headers["Content-Language"] == lang
    # A cache in between keeps one copy per language.
    assert "Accept-Language" in response.headers["Vary"]


def test_the_error_pages_speak_the_browsers_language(client, user):
    client.force_login(user)
    assert "未找到" in client.get("/c/no-such-page/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    # Django renders 500.html with no request, in the language the request had.
    with translation.override("zh-hans"):
        page = render_to_string("500.html")
    assert '<html lang="zh-hans">' in page and "出错了" in page
