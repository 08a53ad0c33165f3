"""django-q2 entry points. They run in the worker processes, never in the web process."""

from artifactflow import health

from .services import execution, recovery, retention


def run_turn(run_id: int) -> None:
    execution.run_start(run_id=run_id)


def runs_sweep() -> dict:
    health.worker_seen()
    return recovery.runs_sweep()


def retention_sweep() -> dict:
    return retention.retention_sweep()


def runs_fold(older_than_days: int) -> int:
    return retention.runs_fold_older(older_than_days=older_than_days).runs
