import pytest

from agents import services
from agents.selectors import run_activity
from conversations import services as conversation_services
from tests.agents.test_engine import call
from tests.model_server import Text

pytestmark = pytest.mark.django_db


def test_the_activity_pairs_each_call_with_its_result_and_shows_hand_offs(user, scripted_model):
    scripted_model.add(
        Text(call("create_artifact", id="task_plan", content="- [ ] look")),
        Text(call("call_subagent", agent="search_agent", instruction="Find WAL docs")),
        Text("Nothing found."),
        Text(call("delete_everything")),
        Text("Done."),
    )
    conversation = conversation_services.conversation_start(user=user, content="Research WAL", enqueue=False)
    run = services.run_execute(run_id=conversation.active_branch.runs.get().pk)

    steps = [(step.kind, step.agent, step.title, step.success) for step in run_activity(run=run)]

    assert steps == [
        ("agent", "lead_agent", "lead_agent starts", None),
        ("tool", "lead_agent", "create_artifact", True),
        ("tool", "lead_agent", "call_subagent", True),
        ("agent", "search_agent", "search_agent starts (from lead_agent)", None),
        ("report", "search_agent", "search_agent reports back", None),
        ("tool", "lead_agent", "delete_everything", False),
    ]
    create, subagent = run_activity(run=run)[1:3]
    assert create.params == {"id": "task_plan", "content": "- [ ] look"}
    assert "Nothing found." in subagent.detail
