"""django-q2 entry points. They run in the worker processes, never in the web process."""

from . import services


def run_turn(run_id: int) -> None:
    services.run_execute(run_id=run_id)


def runs_sweep() -> dict:
    return services.runs_sweep()
