"""The turns' figures Prometheus reads from the database at each scrape
(registered with artifactflow.metrics as the app is ready)."""

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from .models import Run


class TurnStates:
    """Turns queued, waiting for a slot, running and waiting for permission:
    one indexed count (agents_run's status index) per scrape."""

    def collect(self):
        family = GaugeMetricFamily("artifactflow_turns", "Turns not yet ended, by state", labels=["state"])
        counts = dict(
            Run.objects.filter(status__in=Run.ACTIVE_STATUSES)
            .values("status")
            .annotate(turns=Count("id"))
            .values_list("status", "turns")
        )
        for status in Run.ACTIVE_STATUSES:
            family.add_metric([status], counts.get(status, 0))
        yield family
