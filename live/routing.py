from django.urls import path, re_path

from .consumers import ConversationConsumer, NotFoundConsumer

websocket_urlpatterns = [
    path("ws/conversations/<uuid:conversation_id>/", ConversationConsumer.as_asgi()),
    # Any other path is refused like a missing conversation, not a server error.
    re_path(r"", NotFoundConsumer.as_asgi()),
]
