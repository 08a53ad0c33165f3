"""What a run has done so far, folded from its event log.

The page and the websocket consumer render runs from the same fold, so a view
rebuilt after a reload or a dropped message is the view that streamed.
"""

from dataclasses import dataclass

from .config import LEAD_AGENT
from .models import Run, RunEvent
from .toolcalls import text_before_calls


@dataclass
class RunView:
    status: str = Run.Status.QUEUED
    activity: str = "Queued"
    text: str = ""
    error: str = ""
    model: str = ""
    demo: bool = False
    run_id: int | None = None
    # The open permission request: id, tool, params, expires_at.
    pending: dict | None = None
    # The last event folded in.
    seq: int = 0
    # A finished answer rendered when it was stored (Message.response_html).
    html: str = ""

    @property
    def is_active(self):
        return self.status in Run.ACTIVE_STATUSES

    @property
    def can_retry(self):
        return self.run_id is not None and self.status in (Run.Status.FAILED, Run.Status.CANCELLED)


def run_get(*, user, run_id: int) -> Run | None:
    """The run with this id if it answers a message of the user's, else None."""
    return Run.objects.select_related("message__conversation").filter(pk=run_id, message__conversation__owner=user).first()


def run_view_apply(view: RunView, event: RunEvent) -> None:
    data = event.data
    view.seq = event.seq
    match event.type:
        case RunEvent.Type.METADATA if data.get("resumed"):
            # The step the dead worker was in is done again from the start.
            view.text = ""
            view.activity = "Resuming"
        case RunEvent.Type.METADATA:
            view.status = Run.Status.RUNNING
            view.model = data.get("model", "")
            view.demo = bool(data.get("demo"))
            view.activity = "Starting"
        case RunEvent.Type.AGENT_START if event.agent == LEAD_AGENT:
            view.activity = "Thinking"
            view.text = ""
        case RunEvent.Type.AGENT_START:
            view.activity = f"{event.agent} is working on: {data.get('instruction', '')[:120]}"
        case RunEvent.Type.AGENT_COMPLETE if event.agent != LEAD_AGENT:
            view.activity = "Thinking"
        case RunEvent.Type.LLM_CHUNK if event.agent == LEAD_AGENT:
            view.text += data.get("content", "")
            view.activity = "Writing"
        case RunEvent.Type.LLM_RETRY if event.agent == LEAD_AGENT:
            # The stream broke off and the model is asked again from the start.
            view.text = ""
            view.activity = "Reconnecting to the model"
        case RunEvent.Type.COMPACTION:
            view.activity = "Summarising the context to make room"
        case RunEvent.Type.LLM_COMPLETE if event.agent == LEAD_AGENT:
            view.text = text_before_calls(data.get("content", view.text))
        case RunEvent.Type.TOOL_START:
            # What the agent wrote before a tool call was a step, not the answer.
            if event.agent == LEAD_AGENT:
                view.text = ""
            view.activity = f"Calling {data.get('tool', 'a tool')}"
        case RunEvent.Type.TOOL_COMPLETE:
            view.activity = "Thinking"
        case RunEvent.Type.PERMISSION_REQUEST:
            view.status = Run.Status.WAITING_PERMISSION
            view.pending = data
            view.activity = f"Waiting for your approval to run {data.get('tool')}"
        case RunEvent.Type.PERMISSION_RESULT:
            view.pending = None
            view.activity = "Thinking"
        case RunEvent.Type.COMPLETE:
            view.status = Run.Status.COMPLETED
            view.text = data.get("response", view.text)
            view.activity = ""
        case RunEvent.Type.ERROR if data.get("cancelled"):
            view.status = Run.Status.CANCELLED
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
            views[run.pk] = RunView(status=run.status, model=run.model, run_id=run.pk)
        else:
            views[run.pk] = RunView(
                status=run.status,
                activity="",
                text=run.message.response,
                html=run.message.response_html,
                error=run.error,
                model=run.model,
                demo=run.model == "demo",
                run_id=run.pk,
            )
    for event in RunEvent.objects.filter(run_id__in=active).order_by("run_id", "seq"):
        run_view_apply(views[event.run_id], event)
    for pk, run in active.items():
        # The run row is the authority on status; events only fill in progress.
        views[pk].status = run.status
    return views


@dataclass
class ActivityStep:
    """One line of a run's activity: an agent starting or answering, a tool call
    and its result, a permission question, a compaction."""

    kind: str
    agent: str
    title: str
    detail: str = ""
    params: dict | None = None
    success: bool | None = None
    duration_ms: int | None = None


ACTIVITY_TYPES = (
    RunEvent.Type.AGENT_START,
    RunEvent.Type.AGENT_COMPLETE,
    RunEvent.Type.TOOL_START,
    RunEvent.Type.TOOL_COMPLETE,
    RunEvent.Type.PERMISSION_REQUEST,
    RunEvent.Type.PERMISSION_RESULT,
    RunEvent.Type.COMPACTION,
    RunEvent.Type.LLM_RETRY,
)


def run_activity(*, run: Run) -> list[ActivityStep]:
    """What the agents did in this run, in order, for the folded activity under
    an answer. Tool starts and results are paired into one step."""
    steps: list[ActivityStep] = []
    open_calls: dict[str, ActivityStep] = {}
    for event in run.events.filter(type__in=ACTIVITY_TYPES).order_by("seq"):
        data = event.data
        match event.type:
            case RunEvent.Type.AGENT_START:
                handed = f" (from {data['from']})" if data.get("from") else ""
                steps.append(ActivityStep("agent", event.agent, f"{event.agent} starts{handed}", data.get("instruction", "")))
            case RunEvent.Type.AGENT_COMPLETE if event.agent != LEAD_AGENT:
                steps.append(ActivityStep("report", event.agent, f"{event.agent} reports back", data.get("response", "")))
            case RunEvent.Type.TOOL_START:
                step = ActivityStep("tool", event.agent, data.get("tool", ""), params=data.get("params") or {})
                open_calls[event.agent] = step
                steps.append(step)
            case RunEvent.Type.TOOL_COMPLETE:
                step = open_calls.pop(event.agent, None)
                if step is None:
                    # A call that failed to parse never started.
                    step = ActivityStep("tool", event.agent, data.get("tool", ""), params={})
                    steps.append(step)
                step.detail, step.success, step.duration_ms = data.get("result", ""), data.get("success"), data.get("duration_ms")
            case RunEvent.Type.PERMISSION_REQUEST:
                steps.append(ActivityStep("permission", event.agent, f"asked to run {data.get('tool')}"))
            case RunEvent.Type.PERMISSION_RESULT:
                steps.append(ActivityStep("permission", event.agent, f"{data.get('tool')}: {data.get('decision')}"))
            case RunEvent.Type.COMPACTION:
                tokens = f"{data.get('tokens_before')} → {data.get('tokens_after')} estimated tokens"
                steps.append(ActivityStep("compaction", event.agent, f"context summarised ({tokens})", data.get("summary", "")))
            case RunEvent.Type.LLM_RETRY:
                steps.append(ActivityStep("retry", event.agent, "the model stream broke off; asked again", data.get("reason", "")))
    return steps
