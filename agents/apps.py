import logging

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate

logger = logging.getLogger(__name__)

SWEEP_SCHEDULE = "artifactflow-runs-sweep"
RETENTION_SCHEDULE = "artifactflow-retention"


def _sweep_schedule(sender, **kwargs):
    from artifactflow.periodic import periodic_ensure

    # Once a minute, runs whose worker died and permission requests nobody answered.
    periodic_ensure(name=SWEEP_SCHEDULE, func="agents.tasks.runs_sweep", minutes=1)
    # Every five minutes, ended runs' events are folded and idle conversations'
    # expired (agents.services.retention), a bounded amount each time.
    periodic_ensure(name=RETENTION_SCHEDULE, func="agents.tasks.retention_sweep", minutes=5)


def _sweep_on_worker_start(sender, **kwargs):
    # A worker process starting after a crash or a restart heals at once the
    # runs its host's dead processes held, rather than after the stale limit.
    from artifactflow.health import worker_seen

    from .services.recovery import runs_sweep

    try:
        worker_seen()
        swept = runs_sweep()
        if swept["recovered"]:
            logger.warning("Recovered %s runs whose worker had died", swept["recovered"])
    except Exception:
        # The schedule sweeps again within a minute; a worker must start regardless.
        logger.exception("The start-up sweep failed")
    finally:
        # The worker's tasks start on connections of their own.
        connections.close_all()


class AgentsConfig(AppConfig):
    name = "agents"

    def ready(self):
        from django_q.signals import post_spawn

        from artifactflow.metrics import collector_register
        from audit.services import changes_track

        from .metrics import TurnStates
        from .models import HttpTool, McpServer, TokenBudget

        # Each registers the check its sources' clean() asks for (agents.source_checks).
        from .tools import http, mcp  # noqa: F401

        collector_register(TurnStates())
        # Who changed a budget or a tool, and how (audit); a tool's secret only as changed.
        changes_track(TokenBudget)
        for source in (HttpTool, McpServer):
            changes_track(source, secrets=("secret_encrypted",), ignored=("created_at", "updated_at"))
        post_migrate.connect(_sweep_schedule, sender=self, dispatch_uid="agents-sweep-schedule")
        post_spawn.connect(_sweep_on_worker_start, dispatch_uid="agents-sweep-on-worker-start")
