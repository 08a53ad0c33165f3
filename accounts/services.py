"""A user's language and theme: chosen in the page header or on the settings
page, kept on the user, and carried in the session so that a page costs no
query to find them."""

from django.conf import settings
from django.http.cookie import parse_cookie
from django.utils import translation

from .models import UserPreference

# The language this session's user chose, copied from their preference at
# sign-in; "" when they chose none (the browser's Accept-Language decides).
SESSION_KEY = "artifactflow_language"
# The theme this session's user chose, copied from their preference at sign-in.
THEME_SESSION_KEY = "artifactflow_theme"


def language_supported(code: str) -> bool:
    return code in dict(settings.LANGUAGES)


def user_language(*, user) -> str:
    preference = UserPreference.objects.filter(user=user).values_list("language", flat=True).first()
    return preference if preference and language_supported(preference) else ""


def user_language_set(*, user, session, language: str) -> None:
    """Keeps `language` as the user's choice, for this session and the next ones."""
    if not language_supported(language):
        raise ValueError(f"Unsupported language {language!r}")
    UserPreference.objects.update_or_create(user=user, defaults={"language": language})
    session[SESSION_KEY] = language


def session_language_load(*, user, session) -> None:
    session[SESSION_KEY] = user_language(user=user)
    session[THEME_SESSION_KEY] = user_theme(user=user)


def user_theme(*, user) -> str:
    theme = UserPreference.objects.filter(user=user).values_list("theme", flat=True).first()
    return theme if theme in UserPreference.Theme.values else UserPreference.Theme.SYSTEM


def user_theme_set(*, user, session, theme: str) -> None:
    """Keeps `theme` as the user's choice, for this session and the next ones."""
    if theme not in UserPreference.Theme.values:
        raise ValueError(f"Unsupported theme {theme!r}")
    UserPreference.objects.update_or_create(user=user, defaults={"theme": theme})
    session[THEME_SESSION_KEY] = theme


def session_theme(*, user, session) -> str:
    """The theme a page is drawn in: the signed-in user's choice, else the system's.
    A session from before themes were kept learns it once."""
    if not user.is_authenticated:
        return UserPreference.Theme.SYSTEM
    theme = session.get(THEME_SESSION_KEY)
    if theme not in UserPreference.Theme.values:
        theme = session[THEME_SESSION_KEY] = user_theme(user=user)
    return theme


def session_language(*, session) -> str:
    """The signed-in user's chosen language, "" for none."""
    language = session.get(SESSION_KEY, "")
    return language if language_supported(language) else ""


def scope_language(*, scope) -> str:
    """The language an ASGI connection is answered in, as its page was (a
    websocket, a request refused before Django reads it): the user's choice,
    else the browser's language cookie or Accept-Language, else the default."""
    session = scope.get("session")
    if session is not None and (chosen := session_language(session=session)):
        return chosen
    headers = dict(scope.get("headers") or [])
    cookie = parse_cookie(headers.get(b"cookie", b"").decode("latin-1")).get(settings.LANGUAGE_COOKIE_NAME, "")
    if language_supported(cookie):
        return cookie
    accept = headers.get(b"accept-language", b"").decode("latin-1")
    for code, _quality in translation.trans_real.parse_accept_lang_header(accept):
        try:
            return translation.get_supported_language_variant(code)
        except LookupError:
            continue
    return settings.LANGUAGE_CODE
