"""What a conversation's websocket takes from its page, and how long it lives.

A page says one thing over its socket, once per (re)connect: the runs it shows
as running (app.js, {"running": [12, 13]}). Anything else, anything larger, or
more often than a page speaks is ignored without a word, so a hostile page can
neither crash its socket nor make it work for others' time.

A socket lives as long as the session that opened it signs its user in: it
closes when that session signs out, and its session is checked again now and
then and whenever the user's password or account changes.
"""

import json
import time
from importlib import import_module

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.core.exceptions import ValidationError
from django.utils.crypto import constant_time_compare, salted_hmac

# A page's message is a few dozen bytes; a larger frame is not even parsed.
MAX_FRAME_CHARS = 4096
# More runs than a conversation has running at once; the rest of a list is ignored.
MAX_RUNS_NAMED = 20
# The largest run id (a bigint key): a larger number is no run, and SQLite
# could not even bind it in a query.
MAX_RUN_ID = 2**63 - 1


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def running_named(text: str | None) -> set[int]:
    """The run ids a page's message names (the first MAX_RUNS_NAMED of its
    list, those that are ids at all); none for anything malformed."""
    if not text or len(text) > MAX_FRAME_CHARS:
        return set()
    try:
        # Python's json reads Infinity and NaN, which are not JSON and no id.
        message = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return set()
    shown = message.get("running") if isinstance(message, dict) else None
    if not isinstance(shown, list):
        return set()
    # `type(...) is int`: True is an int to Python and 1.0 equals 1, neither is an id.
    return {run_id for run_id in shown[:MAX_RUNS_NAMED] if type(run_id) is int and 0 < run_id <= MAX_RUN_ID}


class MessageBudget:
    """A token bucket: `take()` says whether a message may be read now; up to
    `burst` at once, then `per_second`."""

    def __init__(self, *, burst: int, per_second: float):
        self.burst, self.per_second = burst, per_second
        self.tokens, self.at = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_second)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def session_tag(session_key: str) -> str:
    """Names a session on the channel layer without its key, which signs its
    holder in and has no business in Redis."""
    # The salt predates this module's move: every web process, old or new, tags a session alike.
    return salted_hmac("conversations.sockets.session_tag", session_key).hexdigest()


def session_signs_in(*, session_key: str | None, user_id) -> bool:
    """Whether the session still signs this user in, as the next page request
    with it would find (django.contrib.auth.get_user): it is stored and not
    expired, names the user and a configured backend, the user is there and
    active, and the hash it keeps matches the user's password (under the
    secret key or one of SECRET_KEY_FALLBACKS).

    Read only: get_user (channels' too) flushes a session that fails and
    rotates one that matches a fallback key, which a check running beside the
    browser's requests must not do; channels' also ignores the fallbacks and
    would sign everyone out on a key rotation."""
    if not session_key:
        return False
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    try:
        session_user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except (KeyError, ValidationError):
        return False
    if session_user_id != user_id or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    user = load_backend(backend_path).get_user(session_user_id)
    session_hash = session.get(HASH_SESSION_KEY)
    if user is None or not session_hash:
        return False
    return any(
        constant_time_compare(session_hash, user_hash)
        for user_hash in (user.get_session_auth_hash(), *user.get_session_auth_fallback_hash())
    )
