"""Secrets of the tools an admin plugs in (an API token, an Authorization
header), encrypted at rest with Fernet.

The key is ARTIFACTFLOW_SECRETS_KEY (a Fernet key: urlsafe base64 of 32
bytes), or, when that is unset, one derived from SECRET_KEY with HKDF, so a
portal works without another variable. Either way, a secret stored under
another key (the variable changed, a database copied from elsewhere) cannot be
read: that is a SecretError saying so, never a crash, and the admin replaces
the secret. Plain text is only ever in memory, at the moment a request is made.
"""

import base64
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Binds the derived key to this use: SECRET_KEY's other uses never yield it.
_HKDF_INFO = b"artifactflow tool secrets v1"


class SecretError(Exception):
    """A stored secret that cannot be read; the message says what to do and never holds the secret."""


@cache
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
