from django.urls import path

from . import views

urlpatterns = [
    path("<int:run_id>/permission/", views.run_permission, name="run-permission"),
    path("<int:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("<int:run_id>/retry/", views.run_retry, name="run-retry"),
    path("<int:run_id>/activity/", views.run_activity, name="run-activity"),
]
