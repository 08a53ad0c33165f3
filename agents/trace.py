"""What a run did, for the administrator's trace page (agents.admin): every
event but the streamed text, in order, with the figures per agent and tool,
the sources the agents read, the permission answers and the artifact versions
the run saved, as the run's one projection (agents.projection) folds them. Two
queries whatever the run's length: its events without the chunks, and its
versions."""

from artifacts.models import ArtifactVersion

from .models import Run, RunEvent
from .projection import RunView, Trace, run_view_apply


def run_trace(*, run: Run) -> Trace:
    trace = Trace(run=run)
    if run.model:
        trace.models.append(run.model)
    view = RunView(trace=trace)
    for event in run.events.exclude(type=RunEvent.Type.LLM_CHUNK).order_by("seq").iterator():
        run_view_apply(view, event)
    trace.versions = list(
        ArtifactVersion.objects.filter(run=run)
        .select_related("artifact")
        .defer("content", "artifact__content")
        .order_by("created_at", "pk")
    )
    if run.error and run.error not in trace.errors:
        trace.errors.append(run.error)
    # Plain dicts: a lookup that misses is not a new agent or tool.
    trace.agent_figures, trace.tool_figures = dict(trace.agent_figures), dict(trace.tool_figures)
    return trace
