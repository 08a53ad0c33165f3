from django.apps import AppConfig
from django.apps import apps as global_apps
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _

# django-q2's schedule that applies the switched-on policies.
SCHEDULE = "retention_policies"
SCHEDULE_MINUTES = 60


class RetentionConfig(AppConfig):
    name = "retention"
    verbose_name = _("Retention")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from audit.services import changes_track

        from .models import RetentionPolicy

        # Who switched a policy on, and to how many days (audit).
        changes_track(RetentionPolicy, ignored=("last_run_at", "last_report"))
        post_migrate.connect(_schedule, sender=self, dispatch_uid="retention-schedule")


def _schedule(*, apps=global_apps, **kwargs):
    # A flush (tests) sends post_migrate without the migration state: the models as they are.
    from django_q.models import Schedule

    from .models import RetentionPolicy

    try:
        # As migrated so far: a migrate of another app alone may not have made this table yet.
        policies = apps.get_model("retention", "RetentionPolicy")
    except LookupError:
        return
    # Every kind has its policy, off: made here rather than in a migration, so
    # that a database flushed and migrated again (tests do) has them too.
    for kind, days in RetentionPolicy.DEFAULT_DAYS.items():
        policies.objects.get_or_create(kind=kind, defaults={"days": days})
    Schedule.objects.update_or_create(
        name=SCHEDULE,
        defaults={
            "func": "retention.services.policies_apply",
            "schedule_type": Schedule.MINUTES,
            "minutes": SCHEDULE_MINUTES,
            "repeats": -1,
        },
    )
