from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate

from . import checks, db, descriptors  # noqa: F401 (checks registers the portal's system checks)

BACKUP_SCHEDULE = "artifactflow-backup"


def _backup_schedule(sender, **kwargs):
    # Every migrate brings the schedule in line with ARTIFACTFLOW_BACKUP_DIR:
    # a backup every ARTIFACTFLOW_BACKUP_HOURS while it is set, none once it is not.
    from django_q.models import Schedule

    if not settings.BACKUP_DIR:
        Schedule.objects.filter(name=BACKUP_SCHEDULE).delete()
        return
    Schedule.objects.update_or_create(
        name=BACKUP_SCHEDULE,
        defaults={
            "func": "artifactflow.backups.backup_scheduled",
            "schedule_type": Schedule.MINUTES,
            "minutes": settings.BACKUP_HOURS * 60,
            "repeats": -1,
        },
    )


class ArtifactflowConfig(AppConfig):
    name = "artifactflow"

    def ready(self):
        # Every process: web, worker and manage.py alike.
        descriptors.descriptor_limit_raise()
        db.pool_fork_guard()
        # This app has no models, so no post_migrate of its own: the schedules' app's.
        post_migrate.connect(
            _backup_schedule, sender=self.apps.get_app_config("django_q"), dispatch_uid="artifactflow-backup-schedule"
        )
