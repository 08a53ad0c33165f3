"""System checks of the portal's own settings."""

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured


def secret_key_set() -> bool:
    """Whether there is a key: on the embedded default, none until `migrate`
    made it (Django refuses to read an empty one)."""
    try:
        return bool(settings.SECRET_KEY)
    except ImproperlyConfigured:
        return False


@register
def secret_key_check(app_configs, **kwargs):
    """Before the first `migrate` says so, rather than fail at the first signed-in page."""
    if not secret_key_set():
        return [
            Error(
                "There is no secret key yet.",
                hint="Run `manage.py migrate` (`make run` does): it makes the data directory's key. "
                "Or set SECRET_KEY in the environment.",
                id="artifactflow.E001",
            )
        ]
    return []
