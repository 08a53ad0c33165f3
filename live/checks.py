"""System checks of the live updates' settings."""

from django.conf import settings
from django.core.checks import Error, register

from .layer import LocalSocketLayer, socket_path_refused


@register
def live_sockets_check(app_configs, **kwargs):
    """At start, rather than at the first page that would stream."""
    layer = settings.CHANNEL_LAYERS.get("default", {})
    if layer.get("BACKEND") != f"{LocalSocketLayer.__module__}.{LocalSocketLayer.__name__}":
        return []
    refused = socket_path_refused(layer["CONFIG"]["directory"])
    return [Error(refused, id="live.E001")] if refused else []
