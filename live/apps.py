from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "live"

    def ready(self):
        # Connects the receivers that end websockets with their session, and registers the checks.
        from . import checks, signals  # noqa: F401
