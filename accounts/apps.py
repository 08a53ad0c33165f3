from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"

    def ready(self):
        # Connects the receivers: a user's language into each new session; ended provider memberships.
        from audit.services import changes_track

        from . import signals  # noqa: F401
        from .models import ProviderGroup

        # Which provider's group grants a group here: who changed it, and how (audit).
        changes_track(ProviderGroup)
