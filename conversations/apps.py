from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"

    def ready(self):
        # Connects the receivers that close the pages of a revoked share.
        from . import signals  # noqa: F401
