from django.urls import path

from . import views

urlpatterns = [
    path("", views.library_index, name="library"),
    path("<id:document_id>/", views.library_document, name="library-document"),
    path("<id:document_id>/delete/", views.library_document_delete, name="library-document-delete"),
    path("<id:document_id>/retry/", views.library_document_retry, name="library-document-retry"),
]

# Web pages as agents read them: /sources/ (artifactflow.urls).
sources_urlpatterns = [
    path("<id:snapshot_id>/", views.snapshot_detail, name="snapshot"),
    path("open/<uuid:conversation_id>/", views.source_open, name="source-open"),
]
