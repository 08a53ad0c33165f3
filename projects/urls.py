from django.urls import path

from . import views

urlpatterns = [
    path("projects/new/", views.project_create, name="project-create"),
    path("projects/<id:project_id>/", views.project_detail, name="project-detail"),
    path("projects/<id:project_id>/settings/", views.project_update, name="project-update"),
    path("projects/<id:project_id>/delete/", views.project_delete, name="project-delete"),
    path("projects/<id:project_id>/members/", views.member_add, name="project-member-add"),
    path("projects/<id:project_id>/members/remove/", views.member_remove, name="project-member-remove"),
    path("projects/<id:project_id>/leave/", views.member_leave, name="project-leave"),
    path("projects/<id:project_id>/library/", views.library_add, name="project-library-add"),
    path("c/<uuid:conversation_id>/project/", views.conversation_move, name="conversation-move"),
    path("c/<uuid:conversation_id>/schedule/", views.schedule_edit, name="schedule-edit"),
    path("c/<uuid:conversation_id>/schedule/action/", views.schedule_action, name="schedule-action"),
]
