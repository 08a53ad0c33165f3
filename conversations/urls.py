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
    path("c/<uuid:conversation_id>/fork/", views.conversation_fork, name="conversation-fork"),
    path("c/<uuid:conversation_id>/pin/", views.conversation_pin, name="conversation-pin"),
    path("c/<uuid:conversation_id>/branch/", views.branch_switch, name="branch-switch"),
    path("c/<uuid:conversation_id>/allowed-tools/", views.allowed_tool_revoke, name="allowed-tool-revoke"),
    path("c/<uuid:conversation_id>/shares/", views.share_create, name="share-create"),
    path("c/<uuid:conversation_id>/shares/remove/", views.share_delete, name="share-delete"),
    path("c/<uuid:conversation_id>/export.md", views.conversation_export_markdown, name="conversation-export-md"),
    path("c/<uuid:conversation_id>/export.docx", views.conversation_export_docx, name="conversation-export-docx"),
    path("c/<uuid:conversation_id>/export.zip", views.conversation_export_zip, name="conversation-export-zip"),
    path("c/<uuid:conversation_id>/artifacts/", include("artifacts.urls")),
]
