from django.urls import path

from . import views

urlpatterns = [
    path("<id:run_id>/permission/", views.run_permission, name="run-permission"),
    path("<id:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("<id:run_id>/retry/", views.run_retry, name="run-retry"),
    path("<id:run_id>/activity/", views.run_activity, name="run-activity"),
]

# The team library's pages, under /library/ (artifactflow.urls).
library_urlpatterns = [
    path("", views.library_index, name="library"),
    path("<id:document_id>/", views.library_document, name="library-document"),
    path("<id:document_id>/delete/", views.library_document_delete, name="library-document-delete"),
]
