"""System checks of the portal's own settings."""

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured


@register
def secret_key_check(app_configs, **kwargs):
    """On the embedded default the key is made by `migrate`: before it, say so
    rather than fail at the first signed-in page."""
    try:
        settings.SECRET_KEY  # noqa: B018
    except ImproperlyConfigured:
        return [
            Error(
                "There is no secret key yet.",
                hint="Run `manage.py migrate` (`make run` does): it makes the data directory's key. "
                "Or set SECRET_KEY in the environment.",
                id="artifactflow.E001",
            )
        ]
    return []
