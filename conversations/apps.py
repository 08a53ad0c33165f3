from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"

    def ready(self):
        # Connects the receivers that end websockets with their session.
        from artifactflow import textsearch

        from . import signals  # noqa: F401

        # Before any connection opens: the search triggers call cjk_split.
        textsearch.receivers_connect()
