"""Which pages may open a websocket: the site's own, by exact origin.

A browser sends cookies with a websocket handshake whatever page opens it, so
the Origin header is what tells the portal's own pages from any other.
Channels' AllowedHostsOriginValidator compares the host alone: a page on
another port or scheme of the same host (another service, a dev server) could
read a conversation. Here scheme, host and port must all match.

The site's origins are CSRF_TRUSTED_ORIGINS when set (a proxy ends TLS, so the
handshake daphne sees is not the one the browser made), else the handshake's
own: the scheme it came by and its Host header, which must be one of
ALLOWED_HOSTS as for any request. A handshake without an Origin (or with more
than one, or "null") is refused: every browser sends one, and a client that
does not is no browser, so it carries no user's cookie it was not given.
"""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
# A websocket's scheme says which scheme its page was served by.
PAGE_SCHEMES = {"ws": "http", "wss": "https"}

Origin = tuple[str, str, int]


def origin_parse(value: str) -> Origin | None:
    """(scheme, host, port) of an origin as browsers send it and settings name
    it, ports made explicit; None for anything else (a path, userinfo, "null")."""
    if not value.isascii() or not value.isprintable() or " " in value:
        # urlsplit would drop tabs and newlines; a browser sends none of these.
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.username is not None:
        return None
    if parts.path or "?" in value or "#" in value:
        return None
    return parts.scheme, parts.hostname, DEFAULT_PORTS[parts.scheme] if port is None else port


def _trusted(origin: Origin) -> bool:
    for pattern in settings.CSRF_TRUSTED_ORIGINS:
        scheme, _, netloc = pattern.partition("://")
        if netloc.startswith("*."):
            # As Django's CSRF check reads it: the domain and its subdomains,
            # on this scheme and port.
            trusted = origin_parse(f"{scheme}://{netloc[2:]}")
            if trusted and (trusted[0], trusted[2]) == (origin[0], origin[2]):
                if is_same_domain(origin[1], "." + trusted[1]):
                    return True
        elif origin_parse(pattern) == origin:
            return True
    return False


def _own(*, origin: Origin, scope) -> bool:
    hosts = [value for name, value in scope["headers"] if name == b"host"]
    if len(hosts) != 1:
        return False
    domain, port = split_domain_port(hosts[0].decode("latin-1"))
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        # As Django answers requests then.
        allowed_hosts = [".localhost", "127.0.0.1", "[::1]"]
    if not domain or not validate_host(domain, allowed_hosts):
        return False
    scheme = PAGE_SCHEMES.get(scope.get("scheme", "ws"))
    if scheme is None:
        return False
    own = origin_parse(f"{scheme}://{domain}:{port}" if port else f"{scheme}://{domain}")
    return own == origin


def origin_allowed(*, scope) -> bool:
    """Whether the websocket handshake in `scope` comes from a page of this site."""
    values = [value for name, value in scope["headers"] if name == b"origin"]
    if len(values) != 1:
        return False
    origin = origin_parse(values[0].decode("latin-1"))
    if origin is None:
        return False
    if settings.CSRF_TRUSTED_ORIGINS:
        return _trusted(origin)
    return _own(origin=origin, scope=scope)


class OriginValidator:
    """ASGI middleware: a websocket handshake from any other origin is refused
    (403) before anything below it runs."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope=scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
