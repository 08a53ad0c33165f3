from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("conversations/", views.conversation_create, name="conversation-create"),
    path("conversations/search/", views.conversation_search, name="conversation-search"),
    path("c/<uuid:conversation_id>/", views.conversation_detail, name="conversation-detail"),
    path("c/<uuid:conversation_id>/messages/", views.message_create, name="message-create"),
    path("c/<uuid:conversation_id>/turns/", views.thread_older, name="thread-older"),
    path("c/<uuid:conversation_id>/rename/", views.conversation_rename, name="conversation-rename"),
    path("c/<uuid:conversation_id>/delete/", views.conversation_delete, name="conversation-delete"),
    path("c/<uuid:conversation_id>/pin/", views.conversation_pin, name="conversation-pin"),
    path("c/<uuid:conversation_id>/branch/", views.branch_switch, name="branch-switch"),
    path("c/<uuid:conversation_id>/allowed-tools/", views.allowed_tool_revoke, name="allowed-tool-revoke"),
    path("c/<uuid:conversation_id>/artifacts/", include("artifacts.urls")),
]
