from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _

SWEEP_SCHEDULE = "artifactflow-library-sweep"


def _sweep_schedule(sender, **kwargs):
    from artifactflow.periodic import periodic_ensure

    # Every five minutes, documents whose reading was lost and passages still without vectors.
    periodic_ensure(name=SWEEP_SCHEDULE, func="library.services.library_sweep", minutes=5)


class LibraryConfig(AppConfig):
    name = "library"
    verbose_name = _("Library")

    def ready(self):
        from . import checks, signals  # noqa: F401

        post_migrate.connect(_sweep_schedule, sender=self, dispatch_uid="library-sweep-schedule")
