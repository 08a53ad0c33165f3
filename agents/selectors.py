"""What a run has done so far, folded from its event log.

The page and the websocket consumer render runs from the same fold, so a view
rebuilt after a reload or a dropped message is the view that streamed.
"""

from dataclasses import dataclass

from .models import Run, RunEvent

LEAD_AGENT = "lead_agent"


@dataclass
class RunView:
    status: str = Run.Status.QUEUED
    activity: str = "Queued"
    text: str = ""
    error: str = ""
    model: str = ""
    demo: bool = False


def run_view_apply(view: RunView, event: RunEvent) -> None:
    data = event.data
    match event.type:
        case RunEvent.Type.METADATA:
            view.status = Run.Status.RUNNING
            view.model = data.get("model", "")
            view.demo = bool(data.get("demo"))
            view.activity = "Starting"
        case RunEvent.Type.AGENT_START:
            view.activity = "Thinking"
            if event.agent == LEAD_AGENT:
                view.text = ""
        case RunEvent.Type.LLM_CHUNK if event.agent == LEAD_AGENT:
            view.text += data.get("content", "")
            view.activity = "Writing"
        case RunEvent.Type.LLM_COMPLETE if event.agent == LEAD_AGENT:
            view.text = data.get("content", view.text)
        case RunEvent.Type.TOOL_START:
            # What the agent wrote before a tool call was a step, not the answer.
            if event.agent == LEAD_AGENT:
                view.text = ""
            view.activity = f"Calling {data.get('tool', 'a tool')}"
        case RunEvent.Type.TOOL_COMPLETE:
            view.activity = "Thinking"
        case RunEvent.Type.COMPLETE:
            view.status = Run.Status.COMPLETED
            view.text = data.get("response", view.text)
            view.activity = ""
        case RunEvent.Type.ERROR:
            view.status = Run.Status.FAILED
            view.error = data.get("message", "The turn failed.")
            view.activity = ""


def run_views(*, runs: list[Run]) -> dict[int, RunView]:
    """A view of each run, reading the events of the unfinished ones in one query."""
    views = {}
    active = {run.pk: run for run in runs if run.is_active}
    for run in runs:
        if run.is_active:
            views[run.pk] = RunView(status=run.status, model=run.model)
        else:
            views[run.pk] = RunView(
                status=run.status,
                activity="",
                text=run.message.response,
                error=run.error,
                model=run.model,
                demo=run.model == "demo",
            )
    for event in RunEvent.objects.filter(run_id__in=active).order_by("run_id", "seq"):
        run_view_apply(views[event.run_id], event)
    for pk, run in active.items():
        # The run row is the authority on status; events only fill in progress.
        views[pk].status = run.status
    return views
