from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"

    def ready(self):
        # Connects the receivers that end websockets with their session.
        from . import signals  # noqa: F401
