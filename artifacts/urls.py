from django.urls import path

from . import views

urlpatterns = [
    path("", views.artifact_pane, name="artifact-pane"),
    path("upload/", views.artifact_upload, name="artifact-upload"),
    path("<str:artifact_id>/", views.artifact_detail, name="artifact-detail"),
    path("<str:artifact_id>/diff/", views.artifact_diff, name="artifact-diff"),
    path("<str:artifact_id>/edit/", views.artifact_edit, name="artifact-edit"),
    path("<str:artifact_id>/export.docx", views.artifact_export_docx, name="artifact-export-docx"),
    path("<str:artifact_id>/raw", views.artifact_raw, name="artifact-raw"),
]
