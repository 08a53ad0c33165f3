from django.urls import path, re_path

from .consumers import ConversationConsumer, NotFoundConsumer, UserConsumer

websocket_urlpatterns = [
    path("ws/conversations/<uuid:conversation_id>/", ConversationConsumer.as_asgi()),
    # A page without a conversation: the user's marks and session only.
    path("ws/user/", UserConsumer.as_asgi()),
    # Any other path is refused like a missing conversation, not a server error.
    re_path(r"", NotFoundConsumer.as_asgi()),
]
