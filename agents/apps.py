from django.apps import AppConfig
from django.db.models.signals import post_migrate

SWEEP_SCHEDULE = "artifactflow-runs-sweep"


def _sweep_schedule(sender, **kwargs):
    # Every migrate makes sure the workers check once a minute for runs whose
    # worker died and for permission requests nobody answered.
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=SWEEP_SCHEDULE,
        defaults={"func": "agents.tasks.runs_sweep", "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1},
    )


class AgentsConfig(AppConfig):
    name = "agents"

    def ready(self):
        post_migrate.connect(_sweep_schedule, sender=self, dispatch_uid="agents-sweep-schedule")
