"""django-q2 entry points. They run in the worker processes, never in the web process."""

from .services import execution, recovery


def run_turn(run_id: int) -> None:
    execution.run_start(run_id=run_id)


def runs_sweep() -> dict:
    return recovery.runs_sweep()
