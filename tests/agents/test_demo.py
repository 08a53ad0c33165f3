"""The offline demo model drives a whole research turn through the real
engine, library, permission prompts and artifacts, with no network."""

import pytest

from agents import services
from agents.demo import REPORT_ID
from agents.models import Run, RunEvent
from artifacts.models import Artifact
from conversations import services as conversation_services

pytestmark = pytest.mark.django_db


def _turn(user, question):
    conversation = conversation_services.conversation_start(user=user, content=question, enqueue=False)
    run = conversation.active_branch.runs.get()
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _answer_until_done(run, user, decision):
    asked = []
    while run.status == Run.Status.WAITING_PERMISSION:
        pending = run.checkpoint["turn"]["pending"]
        asked.append(pending["params"]["url"])
        services.permission_answer(run_id=run.pk, user=user, request_id=pending["id"], decision=decision)
        services.run_execute(run_id=run.pk)
        run.refresh_from_db()
    return run, asked


def test_the_demo_plans_searches_reads_through_the_prompt_and_reports(user, demo_model):
    run = _turn(user, "How does SQLite WAL mode let readers and a writer work at once?")
    assert run.status == Run.Status.WAITING_PERMISSION

    run, asked = _answer_until_done(run, user, "approve")

    assert run.status == Run.Status.COMPLETED and run.model == "demo"
    assert asked and all(url.startswith("library://") for url in asked)
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    assert "SQLite WAL mode" in report.content and "checkpoint" in report.content
    plan = Artifact.objects.get(artifact_id="task_plan").content
    assert "- [ ]" not in plan and plan.count("- [x]") == 3
    assert "offline demo model" in run.message.response
    agents = {event.agent for event in run.events.filter(type=RunEvent.Type.AGENT_START)}
    assert agents == {"lead_agent", "search_agent", "crawl_agent"}


def test_a_denied_read_is_reported_not_invented(user, demo_model):
    run, asked = _answer_until_done(_turn(user, "How does SQLite WAL mode work?"), user, "deny")

    assert run.status == Run.Status.COMPLETED and asked
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert "Could not read it" in report and "denied" in report
    assert "checkpoint" not in report
