"""Websockets open from the site's exact origin only (artifactflow.origins)."""

import pytest

from artifactflow.origins import origin_allowed, origin_parse


def _scope(*, origin=None, host="localhost:8000", scheme=None):
    headers = [(b"host", host.encode())] if host is not None else []
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    scope = {"type": "websocket", "headers": headers}
    if scheme is not None:
        scope["scheme"] = scheme
    return scope


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("http://localhost:8000", ("http", "localhost", 8000)),
        ("https://Portal.Example.com", ("https", "portal.example.com", 443)),
        ("http://[::1]:8000", ("http", "::1", 8000)),
        ("http://localhost:0", ("http", "localhost", 0)),
    ],
)
def test_an_origin_is_its_scheme_host_and_port(value, parsed):
    assert origin_parse(value) == parsed


@pytest.mark.parametrize(
    "value",
    [
        "null",
        "",
        "localhost:8000",
        "ws://localhost:8000",
        "file://",
        "http://localhost:8000/",
        "http://localhost:8000/page",
        "http://localhost:8000?",
        "http://localhost:8000#",
        "http://user@localhost:8000",
        "http://:pw@localhost:8000",
        "http://localhost:99999",
        "http://localhost:80a",
        "http://local\thost:8000",
        "http://localhost:8000\n",
        " http://localhost:8000",
        "http://lоcalhost:8000",  # a Cyrillic о
        "http://[::1:8000",
    ],
)
def test_anything_but_a_bare_origin_is_none(value):
    assert origin_parse(value) is None


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "allowed"),
    [
        ("http://localhost:8000", "localhost:8000", None, True),
        ("http://localhost:8000", "localhost:8000", "ws", True),
        ("https://localhost:8000", "localhost:8000", "wss", True),
        ("http://localhost", "localhost", None, True),
        ("http://localhost:80", "localhost", None, True),
        ("http://localhost:8001", "localhost:8000", None, False),
        ("http://localhost:8000", "localhost", None, False),
        ("https://localhost:8000", "localhost:8000", None, False),
        ("http://localhost:8000", "localhost:8000", "wss", False),
        ("http://127.0.0.1:8000", "localhost:8000", None, False),
        ("http://evil.example", "evil.example", None, False),
        ("http://localhost:8000", None, None, False),
        ("http://localhost:8000", "localhost:8000", "http", False),
    ],
)
def test_without_trusted_origins_the_handshakes_own_origin_is_the_sites(settings, origin, host, scheme, allowed):
    settings.CSRF_TRUSTED_ORIGINS = []
    assert origin_allowed(scope=_scope(origin=origin, host=host, scheme=scheme)) is allowed


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("https://portal.example.com", True),
        ("https://portal.example.com:443", True),
        ("http://portal.example.com", False),
        ("https://portal.example.com:8443", False),
        ("https://team.example.org:8443", True),
        ("https://a.team.example.org:8443", False),
        ("https://docs.example.net", True),
        ("https://example.net", True),
        ("https://deep.docs.example.net", True),
        ("https://evilexample.net", False),
        ("http://docs.example.net", False),
        ("https://docs.example.net:8443", False),
        ("http://localhost:8000", False),
    ],
)
def test_trusted_origins_are_the_sites_when_set(settings, origin, allowed):
    settings.CSRF_TRUSTED_ORIGINS = [
        "https://portal.example.com",
        "https://team.example.org:8443",
        "https://*.example.net",
    ]
    assert origin_allowed(scope=_scope(origin=origin, host="localhost:8000")) is allowed


def test_allowed_hosts_still_apply_to_the_handshake(settings):
    settings.CSRF_TRUSTED_ORIGINS = []
    settings.ALLOWED_HOSTS = [".example.com"]
    assert origin_allowed(scope=_scope(origin="http://a.example.com:8000", host="a.example.com:8000"))
    assert not origin_allowed(scope=_scope(origin="http://localhost:8000", host="localhost:8000"))


def test_a_handshake_with_no_origin_or_two_is_refused(settings):
    settings.CSRF_TRUSTED_ORIGINS = []
    assert not origin_allowed(scope=_scope(origin=None))
    scope = _scope(origin="http://localhost:8000")
    scope["headers"].append((b"origin", b"http://localhost:8000"))
    assert not origin_allowed(scope=scope)
