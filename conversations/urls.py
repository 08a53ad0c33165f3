from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.chat, name="chat"),
    path("conversations/", views.conversation_create, name="conversation-create"),
    path("c/<uuid:conversation_id>/", views.conversation_detail, name="conversation-detail"),
    path("c/<uuid:conversation_id>/messages/", views.message_create, name="message-create"),
    path("c/<uuid:conversation_id>/artifacts/", include("artifacts.urls")),
]
