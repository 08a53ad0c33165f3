from django.urls import path

from . import views

# Uploading is a POST to the list itself, so no route word sits beside the
# artifact ids: an artifact may be called "upload", "diff" or anything else.
urlpatterns = [
    path("", views.artifact_pane, name="artifact-pane"),
    path("<artifact:artifact_id>/", views.artifact_detail, name="artifact-detail"),
    path("<artifact:artifact_id>/diff/", views.artifact_diff, name="artifact-diff"),
    path("<artifact:artifact_id>/page/", views.artifact_page, name="artifact-page"),
    path("<artifact:artifact_id>/edit/", views.artifact_edit, name="artifact-edit"),
    path("<artifact:artifact_id>/preview/", views.artifact_preview, name="artifact-preview"),
    path("<artifact:artifact_id>/restore/", views.artifact_restore, name="artifact-restore"),
    path("<artifact:artifact_id>/conflict/", views.artifact_conflict_dismiss, name="artifact-conflict-dismiss"),
    path("<artifact:artifact_id>/delete/", views.artifact_delete, name="artifact-delete"),
    path("<artifact:artifact_id>/export.docx", views.artifact_export_docx, name="artifact-export-docx"),
    path("<artifact:artifact_id>/raw", views.artifact_raw, name="artifact-raw"),
]
