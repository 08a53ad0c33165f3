from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


def _schedules_schedule(sender, **kwargs):
    from artifactflow.periodic import periodic_ensure

    from .schedules import SCHEDULE_NAME

    # Once a minute, the research that is due (projects.schedules).
    periodic_ensure(name=SCHEDULE_NAME, func="projects.schedules.schedules_run_due", minutes=1)


class ProjectsConfig(AppConfig):
    name = "projects"
    verbose_name = _("Projects")

    def ready(self):
        from audit.services import changes_track

        # The receivers that close the pages of a project left, and that count
        # a schedule's failures as its turns end.
        from . import signals  # noqa: F401
        from .models import Project, ProjectMember, Schedule

        # Who made, shared or scheduled what, and how (audit).
        changes_track(Project, ignored=("created_at", "updated_at"))
        changes_track(ProjectMember, ignored=("created_at",))
        changes_track(Schedule, ignored=("next_run_at", "last_run_at", "created_at", "updated_at"))
        post_migrate.connect(_schedules_schedule, sender=self, dispatch_uid="projects-schedules-schedule")
