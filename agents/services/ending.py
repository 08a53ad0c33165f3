"""How a run that did not complete ends, whoever ends it: the worker that
held it (`agents.services.execution`), a cancel of a run no worker holds
(`agents.services.runs`) or the sweep after its worker died
(`agents.services.recovery`). Its artifacts are saved, the answer the page
showed kept, the `error` event written and the run's row saved, inside the
caller's transaction (and under its lease, if it holds one). It imports none
of those three."""

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from artifactflow.rendered import answer_html
from artifacts.branches import Branch, branch_at
from artifacts.manager import ArtifactManager, FlushReport
from artifacts.models import ArtifactSession

from .. import engine
from ..events import RunEventLog
from ..models import Run, RunEvent
from ..projection import RunView, run_view_apply
from ..state import checkpoint_state
from .admission import runs_admit

# Stored in English on the run and translated as a page shows it (agents.projection.stored_text).
CANCELLED = gettext_noop("Cancelled.")


def run_end_unheld(*, run: Run, log: RunEventLog, status: str, error: str = "") -> None:
    """End a run no worker holds (queued, waiting for permission, or its worker
    dead), inside the caller's transaction: the artifacts its checkpoint
    carries are saved first."""
    artifacts = ArtifactManager(branch=run_branch(run), run_id=run.pk, on_change=log.artifacts_changed)
    artifacts.restore((run.checkpoint or {}).get("artifacts", []))
    flush = artifacts.flush_all()
    if run.checkpoint:
        run.checkpoint = {**run.checkpoint, "artifacts": artifacts.working_state()}
        run.metrics = engine.turn_metrics(checkpoint_state(run.checkpoint))
    run_end_save(run=run, log=log, status=status, error=error, flush=flush)


def run_end_save(*, run: Run, log: RunEventLog, status: str, error: str, flush: FlushReport) -> None:
    """A failed or cancelled ending: the answer the page showed is kept, the
    `error` event written (first: a lease allows no write after the status
    changes) and the run's row saved."""
    # The text streamed since the last chunk row was written: pages showed it
    # live, and the answer kept is read from the rows.
    log.flush_chunks()
    answer_keep(message=run.message, text=_answer_shown(run=run))
    if status == Run.Status.CANCELLED:
        error_emit(log=log, flush=flush, message=CANCELLED, cancelled=True)
    else:
        error = error_emit(log=log, flush=flush, message=error)
    run.status, run.finished_at, run.error = status, timezone.now(), error
    run.save(update_fields=["status", "finished_at", "error", "checkpoint", "worker_deaths", "metrics"])
    runs_admit(user_id=run.message.conversation.owner_id)


def error_emit(*, log: RunEventLog, flush: FlushReport, message: str, cancelled: bool = False) -> str:
    """The `error` event of a turn that did not complete, naming the artifacts
    it could not save; returns the message it wrote."""
    if flush.failed:
        message += f" These artifacts could not be saved: {', '.join(sorted(flush.failed))}."
    log.emit(
        RunEvent.Type.ERROR,
        data={"message": message, **({"cancelled": True} if cancelled else {}), **flush_data(flush)},
    )
    return message


def flush_data(flush: FlushReport) -> dict:
    return {
        "artifacts": {
            "flushed": flush.flushed,
            "conflicts": flush.conflicts,
            "dropped": flush.dropped,
            "failed": flush.failed,
        }
    }


def _answer_shown(*, run: Run) -> str:
    """The answer text the run's page shows now, folded from its event log."""
    view = RunView()
    for event in run.events.order_by("seq"):
        run_view_apply(view, event)
    return view.text.strip()


def answer_keep(*, message, text: str) -> None:
    message.response = text
    message.save(update_fields=["response"])
    # Rendered by the worker, so that no page view waits for it; once the
    # transaction, which may hold SQLite's one writer's lock, has committed.
    transaction.on_commit(lambda: answer_html(text))


def run_branch(run: Run) -> Branch:
    """The artifacts a turn works on: its message's branch. A conversation
    made outside the portal's services (by a script) may lack its artifact
    session: it gets it here, or its runs could never be executed or ended."""
    conversation = run.message.conversation
    try:
        session = conversation.artifact_session
    except ArtifactSession.DoesNotExist:
        session, _ = ArtifactSession.objects.get_or_create(conversation=conversation)
    return branch_at(session=session, message_id=run.message_id)
