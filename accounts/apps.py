from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"

    def ready(self):
        # Connects the receivers: a user's language into each new session; ended provider memberships.
        from . import signals  # noqa: F401
