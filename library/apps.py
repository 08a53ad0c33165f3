from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _

SWEEP_SCHEDULE = "artifactflow-library-sweep"


def _sweep_schedule(sender, **kwargs):
    # Every migrate makes sure the workers look every five minutes for
    # documents whose reading was lost and passages still without vectors.
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=SWEEP_SCHEDULE,
        defaults={
            "func": "library.services.library_sweep",
            "schedule_type": Schedule.MINUTES,
            "minutes": 5,
            "repeats": -1,
        },
    )


class LibraryConfig(AppConfig):
    name = "library"
    verbose_name = _("Library")

    def ready(self):
        from . import checks, signals  # noqa: F401

        post_migrate.connect(_sweep_schedule, sender=self, dispatch_uid="library-sweep-schedule")
