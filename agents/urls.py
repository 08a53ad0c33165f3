from django.urls import path

from . import views

urlpatterns = [
    path("<id:run_id>/permission/", views.run_permission, name="run-permission"),
    path("<id:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("<id:run_id>/retry/", views.run_retry, name="run-retry"),
    path("<id:run_id>/activity/", views.run_activity, name="run-activity"),
]
