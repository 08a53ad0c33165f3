"""What the lead sees: its system prompt and the history along the branch."""

import pytest
from django.utils import timezone

from agents.config import AGENTS, LEAD, LEAD_AGENT
from agents.context import agent_messages, prompt_text, system_prompt
from agents.llm.base import XML
from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from artifacts import services as artifact_services
from artifacts.branches import branch_at
from artifacts.manager import ArtifactManager
from conversations import lifecycle
from tests.factories import (
    ConversationFactory,
    MessageFactory,
    ProjectFactory,
    ProjectMemberFactory,
    RunFactory,
)
from tests.model_server import Text

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation():
    return ConversationFactory()


@pytest.fixture
def manager(conversation):
    return ArtifactManager(branch=branch_at(session=conversation.artifact_session, message_id=None))


def test_the_lead_is_told_the_date_and_time_and_its_time_zone(manager):
    with timezone.override("Asia/Kolkata"):
        before = timezone.localtime()
        prompt = system_prompt(config=LEAD, artifacts=manager, tool_mode=XML)
        after = timezone.localtime()

    # Read between two clock readings: the minute may turn in between.
    shown = {f"{now:%A} {now.isoformat(sep=' ', timespec='minutes')}" for now in (before, after)}
    assert any(f"# Current time\n\n{when} (time zone Asia/Kolkata)." in prompt for when in shown)
    assert "+05:30" in prompt


def test_the_inventory_tells_an_empty_text_from_a_stored_file(conversation, manager):
    manager.create(artifact_id="notes", content="", title="Notes")
    artifact_services.artifact_upload(
        branch=manager.branch, filename="chart.png", data=b"\x89PNG\r\n\x1a\n" + b"\x00" * 32, content_type="image/png"
    )

    prompt = system_prompt(config=LEAD, artifacts=manager, tool_mode=XML)

    assert "- `notes` — Notes (text/markdown, version 1, from agent): (empty)" in prompt
    assert "- `chart.png` — chart.png (image/png, version 1, from user_upload): (a stored file, not text)" in prompt


def test_the_inventory_previews_each_artifact_in_about_as_many_tokens_whatever_its_script(manager):
    chinese = "预写日志让读者与写者互不阻塞，检查点把日志写回数据库文件。" * 20
    english = "In WAL mode readers do not block the writer, and checkpoints copy the log back. " * 20
    manager.create(artifact_id="zh", content=chinese, title="中文笔记")
    manager.create(artifact_id="en", content=english, title="Notes")

    prompt = system_prompt(config=LEAD, artifacts=manager, tool_mode=XML)

    assert f"- `zh` — 中文笔记 (text/markdown, version 1, from agent): {chinese[:50]}\n" in prompt
    assert f"- `en` — Notes (text/markdown, version 1, from agent): {english[:200]}" in prompt


def _turn(conversation, parent, content, response, *statuses):
    """A message answered by runs in `statuses`, the last of which wrote the answer."""
    message = MessageFactory(conversation=conversation, parent=parent, content=content, response=response)
    runs = [RunFactory(message=message, status=status) for status in statuses]
    return message, runs


def _compacted(run, summary):
    RunEvent.objects.create(run=run, seq=1, type=RunEvent.Type.COMPACTION, agent=LEAD_AGENT, data={"summary": summary})


def _history(message):
    return agent_messages(system="system", message=message, instruction="", summary="", interactions=[])[1:]


@pytest.mark.events_by_hand
def test_a_failed_attempts_compaction_is_not_the_boundary_an_earlier_completed_one_is(conversation):
    first, [first_run] = _turn(conversation, None, "Q1", "A1", Run.Status.COMPLETED)
    second, [failed, _] = _turn(conversation, first, "Q2", "A2", Run.Status.FAILED, Run.Status.COMPLETED)
    current = MessageFactory(conversation=conversation, parent=second, content="Q3")
    _compacted(first_run, "Summary of Q1")
    _compacted(failed, "Summary of a failed try at Q2")

    assert _history(current) == [
        {"role": "user", "content": "<context_summary>\nSummary of Q1\n</context_summary>"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2"},
        {"role": "user", "content": "Q3"},
    ]


@pytest.mark.events_by_hand
def test_when_only_a_cancelled_run_compacted_the_whole_history_is_sent(conversation):
    first, [cancelled, _] = _turn(conversation, None, "Q1", "A1", Run.Status.CANCELLED, Run.Status.COMPLETED)
    current = MessageFactory(conversation=conversation, parent=first, content="Q2")
    _compacted(cancelled, "Summary of a cancelled try at Q1")

    assert _history(current) == [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
    ]


# --- The user's language -----------------------------------------------------------------


def _section(prompt, heading):
    """The words under a top-level heading of a prompt, up to the next one."""
    return " ".join(prompt.split(f"\n{heading}\n", 1)[1].split("\n# ", 1)[0].split())


def test_the_lead_is_told_to_plan_report_and_answer_in_the_users_language(manager):
    language = _section(system_prompt(config=LEAD, artifacts=manager, tool_mode=XML), "# Language")

    assert "A question in Chinese gets its task plan, its report and your answer in Chinese" in language
    assert "a question in English gets them in English" in language
    assert "Write your instructions to the subagents in that language too" in language
    assert "Tool names, parameter names and artifact ids (`task_plan`, `research_report`) stay exactly" in language


def test_each_agent_of_a_turn_is_told_to_write_in_its_users_language(user, scripted_model):
    scripted_model.add(
        Text(
            "<tool_call><name>call_subagent</name><params><agent>search_agent</agent>"
            "<instruction>查找空气源热泵在寒冷天气下的资料</instruction></params></tool_call>"
        ),
        Text("找到的资料：无。"),
        Text("没有找到资料。"),
    )
    conversation = lifecycle.conversation_start(user=user, content="空气源热泵冬天好用吗？", enqueue=False)

    run_execute(run_id=conversation.active_branch.runs.get().pk)

    lead, search, _ = (request["messages"][0]["content"] for request in scripted_model.requests)
    assert "A question in Chinese gets its task plan, its report and your answer in Chinese" in _section(
        lead, "# Language"
    )
    assert "a task in Chinese gets a report in Chinese" in _section(search, "# Language")


@pytest.mark.parametrize("agent", ["search_agent", "crawl_agent"])
def test_a_subagent_reports_in_the_language_of_its_task_and_keeps_tool_names(manager, agent):
    language = _section(system_prompt(config=AGENTS[agent], artifacts=manager, tool_mode=XML), "# Language")

    assert "Write your report in the language of your task" in language
    assert "a task in Chinese gets a report in Chinese" in language
    assert "Tool names and parameters stay exactly as specified" in language


def test_a_compacted_context_keeps_the_users_language():
    assert "Write the summary in the language the user wrote in" in " ".join(prompt_text("compaction").split())


# --- A project's standing instructions ------------------------------------------------------------

INSTRUCTIONS = "报告一律用中文，价格以人民币计，并注明报价日期。"


@pytest.fixture
def in_project(user):
    project = ProjectFactory(owner=user, name="热泵市场", instructions=INSTRUCTIONS)
    return lifecycle.conversation_start(user=user, content="热泵的价格是多少？", project=project, enqueue=False)


def test_the_lead_is_given_the_projects_instructions_before_the_time(manager):
    project = ProjectFactory(name="热泵市场", instructions=INSTRUCTIONS)

    prompt = system_prompt(config=LEAD, artifacts=manager, tool_mode=XML, project=project)

    assert "This conversation is part of the project “热泵市场”." in prompt
    assert _section(prompt, "# Project instructions").endswith(INSTRUCTIONS)
    # Among the parts that stay the same from call to call, before the time.
    assert prompt.index("# Project instructions") < prompt.index("# Current time")


@pytest.mark.parametrize("agent", ["search_agent", "crawl_agent"])
def test_a_subagent_is_not_given_the_projects_instructions(manager, agent):
    project = ProjectFactory(instructions=INSTRUCTIONS)

    prompt = system_prompt(config=AGENTS[agent], artifacts=manager, tool_mode=XML, project=project)

    assert "# Project instructions" not in prompt and INSTRUCTIONS not in prompt


@pytest.mark.parametrize("project", [None, "blank"])
def test_without_a_project_or_its_instructions_the_lead_is_given_none(manager, project):
    project = ProjectFactory(instructions="") if project else None

    assert "# Project instructions" not in system_prompt(config=LEAD, artifacts=manager, tool_mode=XML, project=project)


def test_a_turn_in_the_project_sends_its_instructions_to_the_lead_alone(in_project, scripted_model):
    scripted_model.add(
        Text(
            "<tool_call><name>call_subagent</name><params><agent>search_agent</agent>"
            "<instruction>查找热泵价格</instruction></params></tool_call>"
        ),
        Text("找到的资料：无。"),
        Text("没有找到价格资料。"),
    )

    run_execute(run_id=in_project.active_branch.runs.get().pk)

    lead, search, lead_again = (request["messages"][0]["content"] for request in scripted_model.requests)
    assert INSTRUCTIONS in lead and INSTRUCTIONS in lead_again
    assert "# Project instructions" not in search and INSTRUCTIONS not in search


def test_a_turn_outside_any_project_sends_no_instructions(user, scripted_model):
    ProjectFactory(owner=user, instructions=INSTRUCTIONS)
    scripted_model.add(Text("答案。"))
    conversation = lifecycle.conversation_start(user=user, content="热泵的价格是多少？", enqueue=False)

    run_execute(run_id=conversation.active_branch.runs.get().pk)

    assert "# Project instructions" not in scripted_model.requests[0]["messages"][0]["content"]


def test_instructions_changed_between_turns_reach_the_next_turn(in_project, user, scripted_model):
    scripted_model.add(Text("第一次回答。"), Text("Second answer."))
    run_execute(run_id=in_project.active_branch.runs.get().pk)
    project = in_project.project
    project.instructions = "Answer in English from now on."
    project.save()

    follow_up = lifecycle.message_post(conversation=in_project, content="And now?", enqueue=False)
    run_execute(run_id=follow_up.runs.get().pk)

    first, second = (request["messages"][0]["content"] for request in scripted_model.requests)
    assert INSTRUCTIONS in first
    assert "Answer in English from now on." in second and INSTRUCTIONS not in second


def test_an_owner_no_longer_in_the_project_gets_its_instructions_no_more(user, scripted_model):
    """A contributor's conversation stays in the project when they are taken
    out; their turns then run as someone who may not read it."""
    project = ProjectFactory(instructions=INSTRUCTIONS)
    member = ProjectMemberFactory(project=project, user=user, role="contributor")
    conversation = lifecycle.conversation_start(user=user, content="热泵的价格是多少？", project=project, enqueue=False)
    member.delete()
    scripted_model.add(Text("答案。"))

    run_execute(run_id=conversation.active_branch.runs.get().pk)

    assert INSTRUCTIONS not in scripted_model.requests[0]["messages"][0]["content"]
