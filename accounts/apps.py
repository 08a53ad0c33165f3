from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"

    def ready(self):
        # Connects the receiver that brings a user's language into each new session.
        from . import signals  # noqa: F401
