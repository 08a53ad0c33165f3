from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "live"

    def ready(self):
        # Connects the receivers that end websockets with their session.
        from . import signals  # noqa: F401
