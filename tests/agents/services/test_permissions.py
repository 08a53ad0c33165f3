import pytest

from agents.models import Run, RunEvent
from agents.selectors import branch_shown_live
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.services.runs import RunStateError, run_cancel
from agents.state import pending_request
from artifacts import selectors as artifact_selectors
from artifacts.models import Artifact
from tests.agents.services.test_execution import _turn
from tests.agents.test_engine import call
from tests.model_server import Text

pytestmark = pytest.mark.django_db


def test_a_turn_paused_for_permission_saves_one_version_per_artifact(user, scripted_model, settings):
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="task_plan", content="- [ ] read")),
        Text(call("update_artifact", id="task_plan", old_str="- [ ] read", new_str="- [x] read")),
        Text(call("rewrite_artifact", id="task_plan", content="- [x] read\n- [x] ask")),
        Text("Done."),
    )
    message, run = _turn(user)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING_PERMISSION
    # Nothing saved during the pause; the pane still shows the work.
    assert not Artifact.objects.exists()
    shown = artifact_selectors.artifact_get(
        branch=branch_shown_live(conversation=message.conversation),
        artifact_id="task_plan",
    )
    assert (shown.live, shown.content) == (True, "- [x] read")

    pending = pending_request(run.checkpoint)
    permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision="approve", enqueue=False)
    run_execute(run_id=run.pk)

    plan = Artifact.objects.get(artifact_id="task_plan")
    assert list(plan.versions.values_list("version", "content")) == [(3, "- [x] read\n- [x] ask")]


@pytest.mark.django_db(transaction=True)
def test_the_question_of_a_paused_turn_is_logged_with_the_pause(user, scripted_model, settings):
    # A page takes a run's status from its row and shows the question only
    # while the row says it waits: the two must never be seen apart.
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="draft")),
        Text(call("rewrite_artifact", id="notes", content="final")),
    )
    _, run = _turn(user)
    seen = []

    def on_event(event):
        if event.type == RunEvent.Type.PERMISSION_REQUEST:
            seen.append(Run.objects.get(pk=run.pk).status)

    run_execute(run_id=run.pk, on_event=on_event)
    assert seen == [Run.Status.WAITING_PERMISSION]
    [request] = run.events.filter(type=RunEvent.Type.PERMISSION_REQUEST)
    assert (request.agent, request.data["tool"], request.data["params"]) == (
        "lead_agent",
        "rewrite_artifact",
        {"id": "notes", "content": "final"},
    )
    assert request.data["id"] == pending_request(Run.objects.get(pk=run.pk).checkpoint).id


def test_cancelling_a_paused_turn_saves_its_work_once(user, scripted_model, settings):
    settings.TOOL_PERMISSIONS = {"rewrite_artifact": "confirm"}
    scripted_model.add(
        Text(call("create_artifact", id="notes", content="kept")),
        Text(call("rewrite_artifact", id="notes", content="never approved")),
    )
    _, run = _turn(user)
    run_execute(run_id=run.pk)

    run_cancel(run_id=run.pk, user=user)

    notes = Artifact.objects.get(artifact_id="notes")
    assert list(notes.versions.values_list("version", "content", "run_id")) == [(1, "kept", run.pk)]


@pytest.mark.parametrize("decision", ["approve", "always"])
def test_a_call_too_long_to_show_whole_cannot_be_approved_however_the_answer_comes(
    user, scripted_model, settings, decision
):
    settings.TOOL_PERMISSIONS = {"create_artifact": "confirm"}
    content = "热泵的效率取决于温差" * 6000
    scripted_model.add(Text(call("create_artifact", id="report", content=content), chunk_size=50_000))
    message, run = _turn(user)
    run_execute(run_id=run.pk)
    run.refresh_from_db()

    with pytest.raises(RunStateError) as refused:
        permission_answer(
            run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision=decision, enqueue=False
        )

    assert str(refused.value) == (
        "This call cannot be approved: its parameter content (60,000 characters) is longer than the 50,000 "
        "characters a person can be shown whole to approve it. Deny it and the agent is told why."
    )
    run.refresh_from_db()
    message.refresh_from_db()
    # Still open, unanswered, and the tool not allowed for the branch.
    assert run.status == Run.Status.WAITING_PERMISSION and pending_request(run.checkpoint).decision is None
    assert "allowed_tools" not in message.metadata
