from django.urls import path

from . import views

urlpatterns = [
    path("", views.library_index, name="library"),
    path("<id:document_id>/", views.library_document, name="library-document"),
    path("<id:document_id>/delete/", views.library_document_delete, name="library-document-delete"),
]
