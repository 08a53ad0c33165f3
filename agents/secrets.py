"""Secrets of the tools an admin plugs in (an API token, an Authorization
header), encrypted at rest with Fernet.

The key is ARTIFACTFLOW_SECRETS_KEY (a Fernet key: urlsafe base64 of 32
bytes), or, when that is unset, one derived from SECRET_KEY with HKDF, so a
portal works without another variable. Either way, a secret stored under
another key (the variable changed, a database copied from elsewhere) cannot be
read: that is a SecretError saying so, never a crash, and the admin replaces
the secret. Plain text is only ever in memory, at the moment a request is made.

What a tool's service says back is scrubbed of the secret (secret_scrub)
before the model, an event or a page sees it.
"""

import base64
import functools
import html.entities
import re

import httpx
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Binds the derived key to this use: SECRET_KEY's other uses never yield it.
_HKDF_INFO = b"artifactflow tool secrets v1"


class SecretError(Exception):
    """A stored secret that cannot be read; the message says what to do and never holds the secret."""


@functools.cache
def _fernet(configured: str, secret_key: str) -> Fernet:
    if configured:
        try:
            return Fernet(configured)
        except ValueError:
            raise ImproperlyConfigured(
                "ARTIFACTFLOW_SECRETS_KEY is not a Fernet key (urlsafe base64 of 32 bytes); make one with "
                '`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`.'
            ) from None
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def _key() -> Fernet:
    # Read each time (cached by value): a test or a reload that changes the settings gets the new key.
    return _fernet(settings.SECRETS_KEY, settings.SECRET_KEY)


def secret_encrypt(value: str) -> str:
    return _key().encrypt(value.encode()).decode("ascii")


def secret_decrypt(token: str) -> str:
    try:
        return _key().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, UnicodeError, ValueError):
        raise SecretError(
            "its stored secret cannot be decrypted with this portal's key (ARTIFACTFLOW_SECRETS_KEY, or "
            "SECRET_KEY when that is unset, changed since it was saved); an administrator must enter it again"
        ) from None


def url_origin(url: str) -> str:
    """The origin a secret entered for `url` is bound to: scheme://host:port,
    the host as DNS is asked for it and the port always said, so that two
    spellings of one origin are one; "" when `url` names no host."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return ""
    if not parsed.host:
        return ""
    host = parsed.raw_host.decode("ascii")
    host = f"[{host}]" if ":" in host else host
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme, "")
    return f"{parsed.scheme}://{host}:{port}"


# --- wiping a secret from what a service says back -------------------------------------------

# Pieces of a secret shorter than this are too common to wipe from text.
SCRUB_MIN_CHARS = 6
SCRUBBED = "[secret]"
# Every HTML character reference of one character: "/" is &sol; too, "&" &amp (legacy, no ";") too.
_ENTITIES: dict[str, list[str]] = {}
for _name, _char in html.entities.html5.items():
    if len(_char) == 1:
        _ENTITIES.setdefault(_char, []).append(_name)
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# A run of base64 (either alphabet), its "/", "+" and "=" perhaps escaped as in JSON or a URL.
_BASE64_RUN = re.compile(r"(?:[A-Za-z0-9+_-]|\\?/|%2[bBfF])+(?:=|%3[dD]){0,2}")
_BASE64_ESCAPED = {"/": r"(?:/|\\/|%2[fF])", "+": r"(?:\+|%2[bB])"}
_TO_URLSAFE = str.maketrans("+/", "-_")


def secret_pieces(value: str) -> tuple[str, ...]:
    """What to wipe of a secret header's value, longest first: the value, each
    word of it ("Bearer abc…": the token alone too), and of Basic credentials
    the decoded user:password and the password alone."""
    pieces = {value, *value.split()}
    scheme, _, credentials = value.strip().partition(" ")
    if scheme.lower() == "basic" and credentials.strip():
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode()
        except (ValueError, UnicodeError):
            decoded = ""
        pieces |= {decoded, decoded.partition(":")[2]}
    return tuple(sorted((p for p in pieces if len(p) >= SCRUB_MIN_CHARS), key=len, reverse=True))


def secret_scrub(text: str, pieces) -> str:
    """`text` with every piece of a secret (secret_pieces) replaced by
    SCRUBBED, in each form a service may echo it: as it is, JSON-escaped (\\/,
    \\u002f), percent-encoded (either case, + for a space), as HTML character
    references (&#47; &#x2F; &sol;), and inside base64 (of the piece, of
    user:piece, of anything holding it, in either alphabet), which is wiped whole."""
    pieces = tuple(pieces)
    if not pieces:
        return text
    forms, in_base64 = _patterns(pieces)
    text = forms.sub(SCRUBBED, text)
    if in_base64.search(text) is None:
        return text
    return _BASE64_RUN.sub(lambda run: SCRUBBED if in_base64.search(run.group()) else run.group(), text)


@functools.lru_cache(maxsize=64)
def _patterns(pieces: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern]:
    """The pieces in any of their forms, each character in any of its own (so
    forms mixed in one echo are found too); and what base64 holding a piece has of it."""
    forms = "|".join("".join(_char_forms(char) for char in piece) for piece in pieces)
    cores = sorted({core for piece in pieces for core in _base64_cores(piece.encode())}, key=len, reverse=True)
    in_base64 = "|".join("".join(_BASE64_ESCAPED.get(char, re.escape(char)) for char in core) for core in cores)
    return re.compile(forms), re.compile(in_base64)


@functools.cache
def _char_forms(char: str) -> str:
    code = ord(char)
    utf8 = char.encode()
    units = [code] if code <= 0xFFFF else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    forms = [
        re.escape(char),
        "(?i:" + "".join(f"%{byte:02x}" for byte in utf8) + ")",
        "".join(f"\\\\u(?i:{unit:04x})" for unit in units),
        f"&#0*{code};?",
        f"&#[xX]0*(?i:{code:x});?",
        # The longest first: "&amp;" before the legacy "&amp", which would leave its ";" behind.
        *(re.escape(f"&{name}") for name in sorted(_ENTITIES.get(char, []), key=len, reverse=True)),
    ]
    if char in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[char]))
    if char.isspace():
        # A form's space; and any run of blanks for a blank.
        return "(?:" + "|".join([r"\s", r"\+", *forms[1:]]) + ")+"
    return "(?:" + "|".join(forms) + ")"


def _base64_cores(piece: bytes) -> set[str]:
    """What the base64 of anything holding `piece` has of it wherever the piece
    starts: at each of the three byte alignments, the characters that the
    piece's bits alone decide; in both alphabets."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + piece).decode()
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(piece)) // 6]
        cores |= {core, core.translate(_TO_URLSAFE)}
    return cores
