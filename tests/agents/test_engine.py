"""The engine's step loop, through the real run service and the scripted model."""

from datetime import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from agents import config
from agents.engine import (
    EVENT_PARAM_CHARS,
    PERMISSION_PARAM_CHARS,
    ROUNDS_LEFT_WARNING,
    _ProseFilter,
)
from agents.models import Run, RunEvent
from agents.selectors import run_activity
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer, permissions_expire
from agents.services.runs import RunStateError
from agents.state import TURN, checkpoint_state, pending_request
from agents.tokens import tokens_estimate
from artifactflow.rendered import answer_html
from artifacts.branches import branch_shown
from artifacts.models import Artifact, ArtifactVersion
from artifacts.services import artifact_edit
from conversations import lifecycle
from tests.bounded import finishes_within
from tests.factories import LibraryDocumentFactory, ProjectFactory
from tests.model_server import Drop, Status, Text, ToolCalls, prompt_tokens

pytestmark = pytest.mark.django_db

PLAN = "# Plan\n\n- [ ] search\n- [ ] read\n- [ ] write"


def call(name, **params):
    body = "".join(f"<{key}>{value}</{key}>" for key, value in params.items())
    return f"<tool_call>\n  <name>{name}</name>\n  <params>{body}</params>\n</tool_call>"


def _run(user, content="Research WAL"):
    conversation = lifecycle.conversation_start(user=user, content=content, enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _events(run, type):
    return list(run.events.filter(type=type).order_by("seq"))


def test_a_turn_that_ticks_the_task_plan_three_times_writes_one_version(user, scripted_model):
    scripted_model.add(
        Text("Let me plan this.\n" + call("create_artifact", id="task_plan", content=PLAN, title="Plan"), chunk_size=5),
        *(
            Text(call("update_artifact", id="task_plan", old_str=f"- [ ] {s}", new_str=f"- [x] {s}"))
            for s in ("search", "read", "write")
        ),
        Text("All done: see **task_plan**."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED
    assert run.message.response == "All done: see **task_plan**."
    plan = Artifact.objects.get(session_id=run.message.conversation_id, artifact_id="task_plan")
    assert plan.content == PLAN.replace("[ ]", "[x]") and plan.title == "Plan"
    assert list(ArtifactVersion.objects.values_list("version", flat=True)) == [4]
    assert [e.data["tool"] for e in _events(run, RunEvent.Type.TOOL_START)] == ["create_artifact"] + [
        "update_artifact"
    ] * 3
    assert all(e.data["success"] for e in _events(run, RunEvent.Type.TOOL_COMPLETE))
    assert _events(run, RunEvent.Type.COMPLETE)[0].data["artifacts"] == {
        "flushed": ["task_plan"],
        "conflicts": [],
        "dropped": [],
        "failed": {},
    }
    streamed = "".join(e.data["content"] for e in _events(run, RunEvent.Type.LLM_CHUNK))
    assert "Let me plan this." in streamed and "<tool_call" not in streamed and "<tool_c" not in streamed
    assert [m["tool_name"] for m in run.metrics["tool_calls"]] == ["create_artifact"] + ["update_artifact"] * 3


def test_the_model_sees_tool_results_the_task_plan_and_the_inventory(user, scripted_model):
    scripted_model.add(
        Text(call("create_artifact", id="task_plan", content=PLAN)),
        Text(call("update_artifact", id="task_plan", old_str="- [ ] nothing", new_str="x")),
        Text("Answer."),
    )

    _run(user)

    first, second, third = (r["messages"] for r in scripted_model.requests)
    assert "## update_artifact" in first[0]["content"] and "no artifacts yet" in first[0]["content"]
    assert "# Current task plan (artifact task_plan, version 1)" in second[0]["content"]
    assert "- [ ] search" in second[0]["content"] and "`task_plan`" in second[0]["content"]
    assert second[-1]["role"] == "user" and '<artifact version="1"' in second[-1]["content"]
    assert second[-2] == {"role": "assistant", "content": call("create_artifact", id="task_plan", content=PLAN)}
    failed = third[-1]["content"]
    assert failed.startswith('<tool_result tool="update_artifact">') and "<error" in failed


def test_only_the_first_of_several_calls_runs(user, scripted_model):
    scripted_model.add(
        Text(call("create_artifact", id="a", content="one") + call("create_artifact", id="b", content="two")),
        Text("Done."),
    )

    run = _run(user)

    assert list(Artifact.objects.values_list("artifact_id", flat=True)) == ["a"]
    assert "call one tool at a time" in scripted_model.requests[1]["messages"][-1]["content"]
    assert run.status == Run.Status.COMPLETED


def test_malformed_unknown_and_ill_formed_calls_are_errors_the_model_recovers_from(user, scripted_model):
    scripted_model.add(
        Text("<tool_call><name>create_artifact</name><params><id>notes</id>"),
        Text(call("delete_everything", id="notes")),
        Text(call("read_artifact", id="task_plan", version="latest")),
        Text(call("create_artifact", id="notes", content="Recovered.")),
        Text("Done."),
    )

    run = _run(user)

    results = [request["messages"][-1]["content"] for request in scripted_model.requests[1:4]]
    assert "needs the parameter(s) content" in results[0]
    assert "no tool 'delete_everything'" in results[1]
    assert "version" in results[2] and "whole number" in results[2]
    assert run.status == Run.Status.COMPLETED and run.message.response == "Done."
    assert Artifact.objects.get(artifact_id="notes").content == "Recovered."
    failed = [event.data["success"] for event in _events(run, RunEvent.Type.TOOL_COMPLETE)]
    assert failed == [False, False, False, True]


def test_an_answer_and_an_artifact_whose_lexer_never_ends_finish_the_turn_shown_plain(user, client, scripted_model):
    """The probe's answer fence and content type each held a worker until its 31-minute timeout."""
    scripted_model.add(
        Text(call("create_artifact", id="schema", content="<!-- never closed", content_type="text/mcschema")),
        Text("研究结果:\n\n```mcschema\n<!--\n```\n", chunk_size=3),
    )
    client.force_login(user)

    with finishes_within(30):
        run = _run(user)
        page = client.get(reverse("conversation-detail", args=[run.message.conversation_id]))
        pane = client.get(reverse("artifact-detail", args=[run.message.conversation_id, "schema"]))

    assert run.status == Run.Status.COMPLETED
    assert "<pre><code>&lt;!--\n</code></pre>" in answer_html(run.message.response)
    assert "<pre><code>&lt;!--\n</code></pre>" in page.content.decode()
    assert '<pre class="plain">&lt;!-- never closed</pre>' in pane.content.decode()


def test_metadata_that_cannot_be_stored_is_refused_to_the_model_which_corrects_it(user, scripted_model):
    """On Postgres a 301-character title lost the artifact and failed the turn."""
    scripted_model.add(
        Text(call("create_artifact", id="report", content="正文", title="标" * 301)),
        Text(call("create_artifact", id="report", content="正文", content_type="text/html\r\nX-Injected: 1")),
        Text(call("create_artifact", id="report", content="正文", title="报告", content_type="text/markdown")),
        Text("Done."),
    )

    run = _run(user)

    errors = [request["messages"][-1]["content"] for request in scripted_model.requests[1:3]]
    assert "A title is at most 300 characters; this one has 301." in errors[0]
    assert "A content type is a media type of at most 100 characters" in errors[1]
    assert run.status == Run.Status.COMPLETED
    assert list(Artifact.objects.values_list("artifact_id", "title", "content_type")) == [
        ("report", "报告", "text/markdown")
    ]


def test_each_agent_has_the_seeds_tool_rounds_unless_the_environment_sets_them(settings):
    settings.MAX_TOOL_ROUNDS = {}
    assert {name: config.max_tool_rounds(name) for name in config.AGENTS} == {
        "lead_agent": 100,
        "search_agent": 3,
        "crawl_agent": 2,
    }

    settings.MAX_TOOL_ROUNDS = {"crawl_agent": 4}
    assert {name: config.max_tool_rounds(name) for name in config.AGENTS} == {
        "lead_agent": 100,
        "search_agent": 3,
        "crawl_agent": 4,
    }


def test_a_tool_rounds_setting_naming_no_agent_fails_the_turn_saying_so(user, scripted_model, settings):
    settings.MAX_TOOL_ROUNDS = {"lead_agent": 5, "poet": 3}

    run = _run(user)

    assert run.status == Run.Status.FAILED
    assert run.error == (
        "ARTIFACTFLOW_MAX_TOOL_ROUNDS names an agent that does not exist: poet. "
        "The agents are lead_agent, search_agent, crawl_agent."
    )
    assert scripted_model.requests == []


def test_near_the_end_of_its_rounds_the_lead_is_told_how_many_are_left(user, scripted_model, settings):
    settings.MAX_TOOL_ROUNDS = {"lead_agent": ROUNDS_LEFT_WARNING + 2}
    scripted_model.add(
        Text(call("create_artifact", id="a", content="one")),
        Text(call("create_artifact", id="b", content="two")),
        Text("Done."),
    )

    _run(user)

    first, second = (scripted_model.requests[n]["messages"][-1]["content"] for n in (1, 2))
    assert "<note>" not in first
    assert second.endswith(
        f"<note>You have {ROUNDS_LEFT_WARNING} tool calls left; then write your final answer.</note>\n</tool_result>"
    )


def test_the_agent_is_told_when_its_tool_rounds_are_spent(user, scripted_model, settings):
    settings.MAX_TOOL_ROUNDS = {"lead_agent": 1}
    scripted_model.add(
        Text(call("create_artifact", id="a", content="one")),
        Text("Here is what I have.\n" + call("create_artifact", id="b", content="two")),
    )

    run = _run(user)

    assert "used all your tool calls" in scripted_model.requests[1]["messages"][-1]["content"]
    assert run.message.response == "Here is what I have."
    assert list(Artifact.objects.values_list("artifact_id", flat=True)) == ["a"]


def test_a_lead_that_only_calls_tools_past_its_rounds_fails_saying_so_and_keeps_its_artifacts(
    user, scripted_model, settings
):
    settings.MAX_TOOL_ROUNDS = {"lead_agent": 2}
    scripted_model.add(*(Text(call("create_artifact", id=name, content=name)) for name in ("a", "b", "c")))

    run = _run(user)

    assert run.status == Run.Status.FAILED
    assert run.error.startswith("The lead agent used all its 2 tool calls without writing an answer")
    assert "Ask again" in run.error and "empty answer" not in run.error
    assert _events(run, RunEvent.Type.ERROR)[0].data["message"] == run.error
    assert run.message.response == ""
    assert sorted(Artifact.objects.values_list("artifact_id", flat=True)) == ["a", "b"]


def test_a_subagent_that_only_calls_tools_past_its_rounds_is_reported_to_the_lead_as_such(user, scripted_model):
    rounds = config.max_tool_rounds("search_agent")
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="Find sources on WAL")),
        *(Text(call("no_such_tool", query="WAL")) for _ in range(rounds + 1)),
        Text("The search found nothing; here is what I know."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED
    report = scripted_model.requests[-1]["messages"][-1]["content"]
    assert report.startswith('<tool_result tool="call_subagent">\n<subagent_result agent="search_agent">')
    assert f"search_agent used all its {rounds} tool calls without writing one" in report
    assert "(no answer)" not in report
    [subagent_result] = [e for e in _events(run, RunEvent.Type.TOOL_COMPLETE) if e.agent == "lead_agent"]
    assert subagent_result.data["success"] is False


def test_a_turn_that_fails_midway_still_saves_its_artifacts(user, scripted_model):
    scripted_model.add(Text(call("create_artifact", id="notes", content="found so far")), Status(400, "bad request"))

    run = _run(user)

    assert run.status == Run.Status.FAILED
    assert Artifact.objects.get(artifact_id="notes").content == "found so far"
    assert _events(run, RunEvent.Type.ERROR)[0].data["artifacts"]["flushed"] == ["notes"]
    # Measured up to where it failed: both calls, the second unsuccessful.
    assert [m["success"] for m in run.metrics["agent_executions"]] == [True, False]
    assert [m["tool_name"] for m in run.metrics["tool_calls"]] == ["create_artifact"]


@pytest.mark.parametrize("cut", range(1, 20))
def test_streamed_prose_never_shows_call_markup_wherever_the_chunks_break(cut):
    text = "Some prose <b>kept</b> < and then " + call("read_artifact", id="x")
    prose = _ProseFilter()
    shown = "".join(prose.feed(text[i : i + cut]) for i in range(0, len(text), cut)) + prose.finish()
    assert shown == "Some prose <b>kept</b> < and then "


def test_a_reply_without_a_call_streams_whole():
    prose = _ProseFilter()
    shown = prose.feed("ends with <tool_") + prose.finish()
    assert shown == "ends with <tool_"


def _run_again(run):
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_the_lead_delegates_to_a_subagent_and_gets_its_report(user, scripted_model):
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="Find three sources on WAL")),
        Text("Found: the SQLite docs, a blog post and a paper."),
        Text("Here is what the search found."),
    )

    run = _run(user, "Research WAL for me")

    lead_first, subagent, lead_second = (r["messages"] for r in scripted_model.requests)
    assert subagent[0]["content"].startswith("# Role") and "search_agent" in subagent[0]["content"]
    assert subagent[1:] == [{"role": "user", "content": "Find three sources on WAL"}]
    assert "# Available subagents" in lead_first[0]["content"]
    assert lead_second[-1]["content"].startswith(
        '<tool_result tool="call_subagent">\n<subagent_result agent="search_agent">'
    )
    assert "the SQLite docs" in lead_second[-1]["content"]
    starts = [(e.agent, e.data["instruction"]) for e in _events(run, RunEvent.Type.AGENT_START)]
    assert starts == [("lead_agent", "Research WAL for me"), ("search_agent", "Find three sources on WAL")]
    assert run.message.response == "Here is what the search found."
    calls = [(m["agent_name"], m["purpose"]) for m in run.metrics["agent_executions"]]
    assert calls == [("lead_agent", "step"), ("search_agent", "step"), ("lead_agent", "step")]
    [delegation] = [t for t in run.metrics["tool_calls"] if t["tool_name"] == "call_subagent"]
    assert delegation["success"] and delegation["called_at"] <= delegation["completed_at"]


def test_a_subagent_called_again_in_the_turn_remembers_its_earlier_activation(user, scripted_model):
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="查找预写日志的资料")),
        Text(call("web_search", query="预写日志")),
        Text("找到了 SQLite 文档。"),
        Text(call("call_subagent", agent="search_agent", instruction="Now find sources on checkpoints")),
        Text("Checkpoints: see the same SQLite docs."),
        Text("Done."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED
    second = scripted_model.requests[4]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert second[1]["content"] == "查找预写日志的资料" and second[2]["content"].endswith("</tool_call>")
    assert second[3]["content"].startswith('<tool_result tool="web_search">')
    assert second[4]["content"] == "找到了 SQLite 文档。"
    assert second[5]["content"] == "Now find sources on checkpoints"
    # The lead's context is its own: it sees the reports, not the search.
    lead_last = scripted_model.requests[5]["messages"]
    assert '<tool_result tool="web_search">' not in str(lead_last)


def test_an_unknown_subagent_is_an_error_the_lead_can_fix(user, scripted_model):
    scripted_model.add(Text(call("call_subagent", agent="poet", instruction="Write")), Text("Answer anyway."))

    run = _run(user)

    assert "no subagent 'poet'" in scripted_model.requests[1]["messages"][-1]["content"]
    assert run.status == Run.Status.COMPLETED


@pytest.fixture
def confirm_create(settings):
    """create_artifact needs the user's approval (web_fetch does by default)."""
    settings.TOOL_PERMISSIONS = {"create_artifact": "confirm"}


def test_a_confirm_tool_pauses_the_run_without_holding_a_worker(user, scripted_model, confirm_create):
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")))

    run = _run(user)

    assert run.status == Run.Status.WAITING_PERMISSION
    [request] = _events(run, RunEvent.Type.PERMISSION_REQUEST)
    assert request.data["tool"] == "create_artifact" and request.data["params"]["id"] == "draft"
    assert pending_request(run.checkpoint).id == request.data["id"]
    assert not Artifact.objects.exists()
    assert not run.events.filter(type__in=RunEvent.TERMINAL_TYPES).exists()


def test_an_approved_call_runs_when_the_turn_resumes(user, scripted_model, confirm_create):
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")), Text("Created it."))
    run = _run(user)
    request_id = pending_request(run.checkpoint).id

    permission_answer(run_id=run.pk, user=user, request_id=request_id, decision="approve")
    run = _run_again(run)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Created it."
    assert Artifact.objects.get(artifact_id="draft").content == "text"
    [result] = _events(run, RunEvent.Type.PERMISSION_RESULT)
    answered_at = result.data.pop("decided_at")
    assert result.data == {"id": request_id, "tool": "create_artifact", "decision": "approve", "by": user.username}
    assert result.created_at >= datetime.fromisoformat(answered_at)
    assert _events(run, RunEvent.Type.TOOL_COMPLETE)[0].data["success"]
    with pytest.raises(RunStateError, match="no longer open"):
        permission_answer(run_id=run.pk, user=user, request_id=request_id, decision="deny")


def test_a_turn_paused_before_every_call_had_its_record_resumes_and_keeps_its_totals(
    user, scripted_model, confirm_create
):
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")), Text("Created it."))
    run = _run(user)
    # The checkpoint as a worker wrote it before this change: a total per agent, and frames without memory.
    turn = run.checkpoint[TURN]
    turn["agent_metrics"] = {
        "lead_agent": {"agent_name": "lead_agent", "model": "scripted-model", "model_calls": 1, "token_usage": None}
    }
    turn["tool_metrics"] = []
    for key in ("agent_executions", "tool_calls", "memories"):
        del turn[key]
    for frame in turn["frames"]:
        del frame["called_at"], frame["history"]
    Run.objects.filter(pk=run.pk).update(checkpoint=run.checkpoint)

    permission_answer(run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="approve")
    run = _run_again(run)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Created it."
    [before, after] = run.metrics["agent_executions"]
    assert before["model_calls"] == 1 and after["purpose"] == "step"
    assert [t["tool_name"] for t in run.metrics["tool_calls"]] == ["create_artifact"]


def test_a_turn_paused_before_its_state_had_a_version_resumes(user, scripted_model, confirm_create):
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")), Text("Created it."))
    run = _run(user)
    # The checkpoint as a worker wrote it before the state was versioned: no
    # version, and a pending request with only the keys the question had.
    turn = run.checkpoint[TURN]
    del turn["version"]
    turn["pending"] = {key: turn["pending"][key] for key in ("id", "agent", "tool", "params", "call_id", "expires_at")}
    Run.objects.filter(pk=run.pk).update(checkpoint=run.checkpoint)

    permission_answer(run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="approve")
    run = _run_again(run)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Created it."
    assert Artifact.objects.get(artifact_id="draft").content == "text"
    assert run.checkpoint[TURN]["version"] == 1


@pytest.mark.parametrize(
    "decision, order",
    [
        ("approve", ["permission_request", "permission_result", "tool_start", "tool_complete"]),
        ("deny", ["permission_request", "permission_result", "tool_complete"]),
    ],
)
def test_a_call_that_needs_approval_starts_only_once_approved(user, scripted_model, confirm_create, decision, order):
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")), Text("Done."))
    run = _run(user)
    permission_answer(run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision=decision)

    run = _run_again(run)

    calls = run.events.filter(type__in=["tool_start", "tool_complete", "permission_request", "permission_result"])
    assert list(calls.order_by("seq").values_list("type", flat=True)) == order
    assert calls.get(type="tool_complete").data["success"] is (decision == "approve")


def test_a_denied_call_is_reported_to_the_model(user, scripted_model, confirm_create):
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")), Text("Understood."))
    run = _run(user)

    with pytest.raises(RunStateError):
        permission_answer(run_id=run.pk, user=user, request_id="stale", decision="deny")
    permission_answer(run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="deny")
    run = _run_again(run)

    assert run.status == Run.Status.COMPLETED
    assert not Artifact.objects.exists()
    assert "denied this call" in scripted_model.requests[-1]["messages"][-1]["content"]
    [denied] = run.metrics["tool_calls"]
    assert (denied["tool_name"], denied["success"], denied["decision"]) == ("create_artifact", False, "deny")
    assert [m["agent_name"] for m in run.metrics["agent_executions"]] == ["lead_agent", "lead_agent"]


def test_always_allow_holds_for_the_rest_of_the_branch_only(user, scripted_model, confirm_create):
    scripted_model.add(
        Text(call("create_artifact", id="a", content="1")),
        Text("One."),
        Text(call("create_artifact", id="b", content="2")),
        Text("Two."),
        Text(call("create_artifact", id="c", content="3")),
    )
    run = _run(user)
    permission_answer(run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="always")
    _run_again(run)
    conversation = run.message.conversation

    follow_up = lifecycle.message_post(conversation=conversation, content="More", enqueue=False)
    run_execute(run_id=follow_up.runs.get().pk)
    new_root = lifecycle.message_post(conversation=conversation, content="Fresh", parent=None, enqueue=False)
    run_execute(run_id=new_root.runs.get().pk)

    assert follow_up.runs.get().status == Run.Status.COMPLETED
    assert new_root.runs.get().status == Run.Status.WAITING_PERMISSION
    assert sorted(Artifact.objects.values_list("artifact_id", flat=True)) == ["a", "b"]


LONG_REPORT = "# Report\n\n" + "A finding, with its evidence and its caveats. " * 5000


def test_a_large_create_is_logged_whole_once_and_only_previewed_after(user, scripted_model):
    scripted_model.add(
        Text(call("create_artifact", id="report", content=LONG_REPORT), chunk_size=50_000), Text("Written.")
    )

    run = _run(user)

    assert Artifact.objects.get(artifact_id="report").content == LONG_REPORT
    [asked] = [e for e in _events(run, RunEvent.Type.LLM_COMPLETE) if "<tool_call>" in e.data["content"]]
    [start] = _events(run, RunEvent.Type.TOOL_START)
    [complete] = _events(run, RunEvent.Type.TOOL_COMPLETE)
    assert LONG_REPORT in asked.data["content"]
    assert start.data["params"] == {"id": "report", "content": LONG_REPORT[:EVENT_PARAM_CHARS]}
    assert start.data["params_truncated"] == {"content": len(LONG_REPORT)}
    assert complete.data["artifact_change"] == {
        "artifact_id": "report",
        "title": "report",
        "version": 1,
        "length": len(LONG_REPORT),
        "removed": 0,
        "added": len(LONG_REPORT),
    }
    assert len(str(complete.data)) < 1000


def test_a_call_waiting_for_permission_is_asked_whole_and_runs_whole(user, scripted_model, confirm_create):
    # Far past what the event log keeps of a tool_start: the person asked sees it all.
    report = LONG_REPORT[: PERMISSION_PARAM_CHARS - 1000]
    scripted_model.add(Text(call("create_artifact", id="report", content=report), chunk_size=50_000), Text("Written."))
    run = _run(user)
    [request] = _events(run, RunEvent.Type.PERMISSION_REQUEST)

    assert request.data["params"] == {"id": "report", "content": report}
    assert "params_truncated" not in request.data
    run = _approve(run, user)
    assert run.status == Run.Status.COMPLETED
    assert Artifact.objects.get(artifact_id="report").content == report


def test_a_call_too_long_to_show_whole_is_marked_cut_and_its_denial_tells_the_model_why(
    user, scripted_model, confirm_create
):
    scripted_model.add(
        Text(call("create_artifact", id="report", content=LONG_REPORT), chunk_size=50_000), Text("In parts, then.")
    )
    run = _run(user)
    [request] = _events(run, RunEvent.Type.PERMISSION_REQUEST)

    # The prompt can tell it cannot show the call whole (and offers only deny).
    assert request.data["params"]["content"] == LONG_REPORT[:PERMISSION_PARAM_CHARS]
    assert request.data["params_truncated"] == {"content": len(LONG_REPORT)}
    permission_answer(run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="deny")
    run = _run_again(run)

    assert run.status == Run.Status.COMPLETED
    assert not Artifact.objects.exists()
    assert (
        f"The user denied this call. It could not be approved: its parameter content ({len(LONG_REPORT):,} "
        f"characters) is longer than the {PERMISSION_PARAM_CHARS:,} characters a person can be shown whole to "
        "approve it; a call with shorter parameters can be."
    ) in scripted_model.requests[-1]["messages"][-1]["content"]


def test_an_unanswered_request_expires_as_denied(user, scripted_model, confirm_create, settings):
    settings.PERMISSION_TIMEOUT = 0
    scripted_model.add(Text(call("create_artifact", id="draft", content="text")), Text("No approval, no draft."))
    run = _run(user)

    assert permissions_expire() == 1
    run = _run_again(run)

    assert run.status == Run.Status.COMPLETED
    assert _events(run, RunEvent.Type.PERMISSION_RESULT)[0].data["decision"] == "expired"
    assert "counts as denied" in scripted_model.requests[-1]["messages"][-1]["content"]


# --- native function calling ----------------------------------------------------


@pytest.fixture
def native(settings, scripted_model):
    settings.ARTIFACTFLOW_LLM = {**settings.ARTIFACTFLOW_LLM, "tool_mode": "native"}
    return scripted_model


def test_native_function_calls_run_and_their_results_answer_the_call_id(user, native):
    native.add(
        ToolCalls([("create_artifact", {"id": "task_plan", "content": PLAN})], content="Planning."),
        ToolCalls([("create_artifact", '{"id": "broken", "content": ')]),
        ToolCalls([("no_such_tool", {})]),
        Text("Done."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Done."
    assert Artifact.objects.get(artifact_id="task_plan").content == PLAN
    first, second, third, fourth = (r["messages"] for r in native.requests)
    assert {t["function"]["name"] for t in native.requests[0]["tools"]} >= {"create_artifact", "call_subagent"}
    assert "<tool_call>" not in first[0]["content"]
    assert second[-2]["tool_calls"][0]["id"] == "call_0_create_artifact" and second[-2]["content"] == "Planning."
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_0_create_artifact"
    assert "not valid JSON" in third[-1]["content"]
    assert "There is no tool 'no_such_tool'" in fourth[-1]["content"] and fourth[-1]["role"] == "tool"


def test_native_calls_beyond_the_first_are_dropped_with_a_note(user, native):
    native.add(
        ToolCalls(
            [("create_artifact", {"id": "a", "content": "one"}), ("create_artifact", {"id": "b", "content": "two"})]
        ),
        Text("Done."),
    )

    _run(user)

    second = native.requests[1]["messages"]
    assert len(second[-2]["tool_calls"]) == 1
    assert "Only the first of your 2 tool calls was run" in second[-1]["content"]
    assert list(Artifact.objects.values_list("artifact_id", flat=True)) == ["a"]


def test_a_native_subagent_reports_back_under_the_leads_call_id(user, native):
    native.add(
        ToolCalls([("call_subagent", {"agent": "search_agent", "instruction": "find WAL docs"})]),
        Text("WAL lets readers and a writer work at once."),
        Text("Summary for the user."),
    )

    run = _run(user)

    assert run.message.response == "Summary for the user."
    last = native.requests[2]["messages"][-1]
    assert last["role"] == "tool" and last["tool_call_id"] == "call_0_call_subagent"
    assert "WAL lets readers" in last["content"]


# --- compaction -------------------------------------------------------------------

SUMMARY = "\n\n".join(
    f"## {n}. {title}\n{body}"
    for n, (title, body) in enumerate(
        [
            ("Primary request", 'The user asked: "Research WAL"'),
            ("Artifacts", "task_plan (the plan), notes (long notes)"),
            ("Tool interactions", "created task_plan and notes"),
            ("Errors and fixes", "none"),
            ("Pending tasks", "write the answer"),
            ("Current work", "notes written"),
            ("Next step", "answer"),
        ],
        start=1,
    )
)


def test_compaction_summarises_older_context_and_keeps_the_plan_and_the_request(user, small_window):
    notes = "WAL notes. " * 3000
    small_window.add(
        Text(call("create_artifact", id="task_plan", content=PLAN)),
        Text(call("create_artifact", id="notes", content=notes), chunk_size=4000),
        Text(SUMMARY),
        Text("Final answer."),
    )

    run = _run(user, content="Research WAL")

    assert run.status == Run.Status.COMPLETED and run.message.response == "Final answer."
    compaction_request, after = small_window.requests[2]["messages"], small_window.requests[3]["messages"]
    assert "seven sections" in compaction_request[0]["content"]
    assert "Research WAL" in compaction_request[1]["content"] and "WAL notes." in compaction_request[1]["content"]
    assert "# Current task plan" in after[0]["content"] and "- [ ] search" in after[0]["content"]
    assert after[1]["content"].startswith("<context_summary>") and "## 7. Next step" in after[1]["content"]
    assert after[2] == {"role": "user", "content": "Research WAL"}
    assert "WAL notes. WAL notes." not in str(after[1:])
    event = _events(run, RunEvent.Type.COMPACTION)[0]
    assert event.data["summary"] == SUMMARY and event.data["tokens_after"] < event.data["tokens_before"]
    assert Artifact.objects.get(artifact_id="notes").content == notes


def test_the_next_turn_continues_from_the_compaction_boundary(user, small_window):
    small_window.add(
        Text(call("create_artifact", id="notes", content="WAL notes. " * 3000), chunk_size=4000),
        Text(SUMMARY),
        Text("Final answer."),
        Text("Second answer."),
    )
    first = _run(user, content="Research WAL")
    second = lifecycle.message_post(
        conversation=first.message.conversation, content="And rollback journals?", enqueue=False
    )

    run_execute(run_id=second.runs.get().pk)

    messages = small_window.requests[3]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"].startswith("<context_summary>")
    assert messages[2]["content"] == "Final answer." and messages[3]["content"] == "And rollback journals?"


def test_a_summary_without_the_seven_sections_cuts_the_oldest_context_and_the_turn_goes_on(user, small_window):
    small_window.add(
        Text(call("create_artifact", id="notes", content="WAL notes. " * 3000), chunk_size=4000),
        Text("Too short to be a summary."),
        Text("The notes are written."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "The notes are written."
    [compaction] = _events(run, RunEvent.Type.COMPACTION)
    assert "seven sections" in compaction.data["failure"]
    assert "Too short to be a summary." not in compaction.data["summary"]
    answered = small_window.requests[-1]["messages"]
    assert answered[1]["content"].startswith("<context_summary>")
    assert tokens_estimate(text=answered[1]["content"]) < 10_000 * 0.3
    assert Artifact.objects.get(artifact_id="notes")


def run_with_a_cut_compaction(user, small_window, *, content="Take notes"):
    """A turn whose notes outgrow the small window and whose summary the
    service refuses: the older context is cut instead."""
    small_window.add(
        Text(call("create_artifact", id="notes", content="WAL notes. " * 3000), chunk_size=4000),
        Status(400, "invalid request"),
        Text("The notes are written."),
    )
    return _run(user, content=content)


def test_a_compaction_the_service_refuses_cuts_the_oldest_context_and_the_turn_goes_on(user, small_window):
    run = run_with_a_cut_compaction(user, small_window, content="记下预写日志的要点")

    assert run.status == Run.Status.COMPLETED and run.message.response == "The notes are written."
    [compaction] = _events(run, RunEvent.Type.COMPACTION)
    assert "invalid request" in compaction.data["failure"]
    assert compaction.data["tokens_after"] < 0.7 * 10_000 < compaction.data["tokens_before"]
    answered = small_window.requests[-1]["messages"]
    assert answered[1]["content"].startswith("<context_summary>") and "记下预写日志的要点" in str(answered)
    purposes = [(m["purpose"], m["success"]) for m in run.metrics["agent_executions"]]
    assert purposes == [("step", True), ("compaction", False), ("step", True)]


def test_a_compaction_is_a_model_call_like_any_other_in_the_metrics(user, small_window):
    small_window.add(
        Text(call("create_artifact", id="notes", content="WAL notes. " * 3000), chunk_size=4000),
        Text(SUMMARY),
        Text("Final answer."),
    )

    run = _run(user)

    step, summary, answer = run.metrics["agent_executions"]
    assert summary["purpose"] == "compaction" and summary["success"]
    assert summary["token_usage"]["completion_tokens"] > 0 and summary["token_usage"]["prompt_tokens"] > 0
    assert step["completed_at"] <= summary["started_at"] <= summary["completed_at"] <= answer["started_at"]


def test_a_compaction_past_the_turns_time_limit_ends_the_turn(user, small_window, settings):
    settings.RUN_TIME_LIMIT = 2
    small_window.add(
        Text(call("create_artifact", id="notes", content="WAL notes. " * 3000), chunk_size=4000),
        Text(SUMMARY, wait=30),
    )

    with finishes_within(10):
        run = _run(user)

    assert run.status == Run.Status.FAILED
    assert run.error == "The turn ran past its time limit of 2 seconds and was stopped."
    assert [e.type for e in _events(run, RunEvent.Type.COMPACTION_START)] == [RunEvent.Type.COMPACTION_START]
    assert not _events(run, RunEvent.Type.COMPACTION)
    assert Artifact.objects.get(artifact_id="notes")
    assert run.metrics["agent_executions"][-1]["purpose"] == "compaction"


def test_a_request_refused_for_its_length_is_compacted_and_asked_once_more(user, small_window):
    # Sized under the compaction threshold by the estimate, over the window by
    # the service's own count: only its refusal says the request is too long.
    small_window.context_window = 3_500
    small_window.add(
        Text(call("create_artifact", id="notes", content="预写日志笔记。" * 400), chunk_size=4000),
        Text(SUMMARY),
        Text("最终答案。"),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "最终答案。"
    [start] = _events(run, RunEvent.Type.COMPACTION_START)
    assert start.data["tokens_before"] >= 10_000
    refused, compaction, asked_again = small_window.requests[1:]
    assert "seven sections" in compaction["messages"][0]["content"]
    assert asked_again["messages"][1]["content"].startswith("<context_summary>")
    assert prompt_tokens(asked_again) < 3_500 < prompt_tokens(refused)


def test_a_request_refused_for_its_length_even_after_compaction_fails_saying_why(user, small_window):
    small_window.context_window = 3_500
    small_window.add(
        Text(call("create_artifact", id="notes", content="预写日志笔记。" * 400), chunk_size=4000),
        Text(SUMMARY + "\n\n" + "预写日志让读者与写者互不阻塞。" * 200),
    )

    run = _run(user)

    assert run.status == Run.Status.FAILED
    assert run.error.startswith("The conversation is too long for the model scripted-model, even after its context")
    assert "maximum context length is 3500 tokens" in run.error
    assert Artifact.objects.get(artifact_id="notes")


def test_a_subagents_memory_counts_against_its_context_and_is_summarised_like_it(user, small_window):
    report = "预写日志让读者与写者互不阻塞。" * 500  # about 7,500 tokens
    small_window.add(
        Text(call("call_subagent", agent="search_agent", instruction="查找预写日志的资料")),
        Text(report, chunk_size=4000),
        Text(call("call_subagent", agent="search_agent", instruction="再查检查点")),
        Text(SUMMARY),
        Text("检查点的资料。"),
        Text("Done."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Done."
    [compaction] = _events(run, RunEvent.Type.COMPACTION)
    assert compaction.agent == "search_agent" and "failure" not in compaction.data
    summarised, second = small_window.requests[3]["messages"], small_window.requests[4]["messages"]
    assert "seven sections" in summarised[0]["content"] and "查找预写日志的资料" in summarised[1]["content"]
    assert second[1]["content"] == "再查检查点" and second[2]["content"].startswith("<context_summary>")
    assert report not in str(second)


# A long Chinese answer, about a token a character where characters over four
# said a quarter of that. In seven sections, so it serves as a compaction's
# summary too: whichever request it answers, the conversation grows the same.
ANSWER_ZH = "\n\n".join(
    f"## {part}. 第{part}部分\n"
    + "".join(
        f"第{n}条：预写日志让读者与写者互不阻塞，检查点把日志写回数据库文件，崩溃后按日志恢复。" for n in range(11)
    )
    for part in range(1, 8)
)


def test_a_long_chinese_conversation_is_compacted_before_the_window_and_every_turn_answers(user, small_window):
    turns = ["预写日志是什么？", "检查点何时运行？", "崩溃后怎样恢复？", "读者会阻塞写者吗？", "总结一下。"]
    small_window.add(*[Text(ANSWER_ZH, chunk_size=500) for _ in range(2 * len(turns))])
    first = _run(user, content=turns[0])
    runs = [first]
    for content in turns[1:]:
        message = lifecycle.message_post(conversation=first.message.conversation, content=content, enqueue=False)
        run_execute(run_id=message.runs.get().pk)
        runs.append(Run.objects.get(message=message))

    assert [run.error for run in runs] == [""] * len(turns)
    assert all(run.status == Run.Status.COMPLETED and run.message.response == ANSWER_ZH for run in runs)
    compactions = RunEvent.objects.filter(type=RunEvent.Type.COMPACTION, run__in=runs)
    # Past 70% of the window, short of the window itself.
    assert compactions and all(0.7 * 10_000 < e.data["tokens_before"] < 10_000 for e in compactions)
    last = small_window.requests[-1]["messages"]
    assert last[1]["content"].startswith("<context_summary>") and last[-1]["content"] == "总结一下。"


def test_compaction_goes_by_the_prompt_tokens_the_service_reports(user, small_window):
    # The service counts the first request at 9,000 tokens, though the estimate
    # makes it far less: the next call is compacted by the service's count.
    small_window.add(
        Text(call("create_artifact", id="task_plan", content=PLAN), prompt_tokens=9_000),
        Text(SUMMARY),
        Text("Final answer."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Final answer."
    assert "seven sections" in small_window.requests[1]["messages"][0]["content"]
    event = _events(run, RunEvent.Type.COMPACTION)[0]
    assert prompt_tokens(small_window.requests[0]) < 0.7 * 10_000 < 9_000 < event.data["tokens_before"]


def test_without_reported_usage_the_estimate_of_the_whole_decides(user, small_window):
    # Chinese notes of 6,000 characters: about 6,000 tokens, which the old
    # characters-over-four estimate took for 1,500.
    notes = ANSWER_ZH * 2
    small_window.add(
        Text(call("create_artifact", id="notes", content=notes), chunk_size=4000, usage=False),
        Text(SUMMARY),
        Text("Final answer."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED and run.message.response == "Final answer."
    assert "seven sections" in small_window.requests[1]["messages"][0]["content"]


def test_a_bad_request_that_is_not_about_length_fails_the_turn_without_compaction(user, scripted_model):
    scripted_model.add(Status(400, "Invalid schema for function 'web_search'.", error_type="invalid_request_error"))

    run = _run(user, content="研究预写日志")

    assert run.status == Run.Status.FAILED
    assert run.error.startswith("The model service answered 400: ") and "Invalid schema" in run.error
    assert not _events(run, RunEvent.Type.COMPACTION_START) and len(scripted_model.requests) == 1


def test_a_turn_past_its_time_limit_fails_with_the_reason_and_keeps_its_artifacts(user, scripted_model, settings):
    settings.RUN_TIME_LIMIT = 1
    scripted_model.add(
        Text(call("create_artifact", id="task_plan", content=PLAN)),
        Text("A slow answer that goes on and on", chunk_size=2, delay=0.1),
    )

    run = _run(user)

    assert run.status == Run.Status.FAILED
    assert run.error == "The turn ran past its time limit of 1 seconds and was stopped."
    assert Artifact.objects.filter(artifact_id="task_plan").exists()


def _approve(run, user):
    permission_answer(run_id=run.pk, user=user, request_id=pending_request(run.checkpoint).id, decision="approve")
    return _run_again(run)


def test_a_research_turn_plans_searches_reads_and_reports(user, scripted_model):
    document = LibraryDocumentFactory(title="SQLite WAL mode", content="In WAL mode readers do not block the writer.")
    scripted_model.add(
        Text("Planning." + call("create_artifact", id="task_plan", content=PLAN)),
        Text(call("call_subagent", agent="search_agent", instruction="Find sources on WAL")),
        Text(call("web_search", query="WAL readers writer")),
        Text(f"Found {document.url}"),
        Text(call("update_artifact", id="task_plan", old_str="- [ ] search", new_str="- [x] search")),
        Text(call("call_subagent", agent="crawl_agent", instruction=f"Read {document.url}")),
        Text(call("web_fetch", url=document.url)),
        Text("Readers do not block the writer."),
        Text(call("create_artifact", id="report", content="# WAL\n\nReaders do not block the writer.")),
        Text("See the report."),
    )

    run = _run(user)
    assert run.status == Run.Status.WAITING_PERMISSION
    assert pending_request(run.checkpoint).tool == "web_fetch"
    assert checkpoint_state(run.checkpoint).phase == "waiting_permission"
    run = _approve(run, user)
    assert checkpoint_state(run.checkpoint).phase == "completed"

    assert run.status == Run.Status.COMPLETED and run.message.response == "See the report."
    search_reply = scripted_model.requests[3]["messages"][-1]["content"]
    assert search_reply.startswith('<tool_result tool="web_search">') and document.url in search_reply
    crawl_reply = scripted_model.requests[7]["messages"][-1]["content"]
    assert "In WAL mode readers do not block the writer." in crawl_reply
    assert "Readers do not block the writer." in scripted_model.requests[8]["messages"][-1]["content"]
    assert "- [x] search" in Artifact.objects.get(artifact_id="task_plan").content
    assert Artifact.objects.get(artifact_id="report").content.startswith("# WAL")
    starts = [event.agent for event in _events(run, RunEvent.Type.AGENT_START)]
    assert starts[:3] == ["lead_agent", "search_agent", "crawl_agent"]
    # Every result is data too, for the page and the trace.
    outputs = {(e.data["tool"], e.data["output"]["kind"]) for e in _events(run, RunEvent.Type.TOOL_COMPLETE)}
    assert outputs == {
        ("create_artifact", "artifact"),
        ("update_artifact", "artifact"),
        ("web_search", "sources"),
        ("web_fetch", "page"),
        ("call_subagent", "report"),
    }
    [searched] = [e.data["output"] for e in _events(run, RunEvent.Type.TOOL_COMPLETE) if e.data["tool"] == "web_search"]
    # The document's one passage: it has no headings to name where it is.
    assert [source.keys() for source in searched["sources"]] == [{"title", "url", "excerpt"}]
    assert [(source["title"], source["url"]) for source in searched["sources"]] == [
        ("SQLite WAL mode", f"{document.url}#1")
    ]
    [read] = [e.data["output"] for e in _events(run, RunEvent.Type.TOOL_COMPLETE) if e.data["tool"] == "web_fetch"]
    assert read["source"] == {
        "title": "SQLite WAL mode",
        "url": document.url,
        "excerpt": "In WAL mode readers do not block the writer.",
    }


def test_a_result_too_long_for_the_context_is_stored_as_an_artifact(user, scripted_model, settings):
    settings.TOOL_RESULT_MAX_CHARS = 1000
    settings.TOOL_RESULT_PREVIEW_CHARS = 100
    long_text = "WAL keeps a log of changes. " * 200
    document = LibraryDocumentFactory(title="Long", content=long_text)
    scripted_model.add(
        Text(call("call_subagent", agent="crawl_agent", instruction=f"Read {document.url}")),
        Text(call("web_fetch", url=document.url)),
        Text("It is stored as web_fetch_result_1."),
        Text(call("read_artifact", id="web_fetch_result_1")),
        Text("Read it."),
    )

    run = _approve(_run(user), user)

    assert run.status == Run.Status.COMPLETED
    stored = Artifact.objects.get(artifact_id="web_fetch_result_1")
    assert long_text.strip() in stored.content
    seen = scripted_model.requests[2]["messages"][-1]["content"]
    assert 'artifact="web_fetch_result_1"' in seen and len(seen) < 1000
    completed = {event.data["tool"]: event.data for event in _events(run, RunEvent.Type.TOOL_COMPLETE)}
    assert completed["web_fetch"]["stored_as"] == "web_fetch_result_1"
    assert "stored_as" not in completed["read_artifact"]
    assert long_text.strip()[:500] in scripted_model.requests[4]["messages"][-1]["content"]


@pytest.mark.parametrize(
    "sentence, stored",
    [
        # About 20,000 tokens in fewer characters than the limit: stored.
        ("预写日志让读者与写者互不阻塞，检查点把日志写回数据库文件。", True),
        # As many characters of English, about 5,000 tokens: read whole.
        ("WAL lets readers and the writer work at once; checkpoints ", False),
    ],
)
def test_a_result_is_stored_by_its_tokens_as_well_as_its_characters(user, scripted_model, settings, sentence, stored):
    """Under the default limits, 20,000 characters or 5,000 tokens."""
    settings.TOOL_PERMISSIONS = {"web_fetch": "auto"}
    page = (sentence * 1000)[:19_500]
    document = LibraryDocumentFactory(title="预写日志", content=page)
    scripted_model.add(
        Text(call("call_subagent", agent="crawl_agent", instruction=f"Read {document.url}")),
        Text(call("web_fetch", url=document.url)),
        Text("Read."),
        Text("Done."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED
    seen = scripted_model.requests[2]["messages"][-1]["content"]
    fetched = next(e for e in _events(run, RunEvent.Type.TOOL_COMPLETE) if e.data["tool"] == "web_fetch")
    if stored:
        assert Artifact.objects.get(artifact_id="web_fetch_result_1").content.count(page) == 1
        assert 'artifact="web_fetch_result_1"' in seen and prompt_tokens({"messages": [{"content": seen}]}) < 1_000
        assert fetched.data["stored_as"] == "web_fetch_result_1"
    else:
        assert page in seen and len(seen) < 20_000
        assert "stored_as" not in fetched.data and not Artifact.objects.filter(artifact_id="web_fetch_result_1")


def test_a_subagents_report_too_long_for_the_context_is_stored_as_an_artifact(user, scripted_model, settings):
    settings.TOOL_RESULT_MAX_CHARS = 1000
    settings.TOOL_RESULT_PREVIEW_CHARS = 100
    report = "WAL lets readers and a writer work at once. " * 50
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="Find sources\non WAL")),
        Text(report),
        Text("See search_agent_report_1."),
    )

    run = _run(user)

    assert run.status == Run.Status.COMPLETED
    stored = Artifact.objects.get(artifact_id="search_agent_report_1")
    assert stored.title == "search_agent report (Find sources on WAL)" and report.strip() in stored.content
    seen = scripted_model.requests[2]["messages"][-1]["content"]
    assert 'artifact="search_agent_report_1"' in seen and report[:50] in seen and len(seen) < 1000
    [handed_back] = [e for e in _events(run, RunEvent.Type.TOOL_COMPLETE) if e.agent == "lead_agent"]
    assert handed_back.data["stored_as"] == "search_agent_report_1"


REPORT = "# WAL report\n\n## Findings\n\nReaders do not block the writer.\n"
TEAM_NOTE = "TEAM NOTE: 检查点每晚运行 — checkpoints run nightly."
EDITED = REPORT + f"\n## Risks\n\n{TEAM_NOTE}\n"


def _report_edited_by_a_person(user, scripted_model):
    """A turn writes the report; the user adds a section to it by hand."""
    scripted_model.add(Text(call("create_artifact", id="research_report", content=REPORT)), Text("Written."))
    first = _run(user)
    conversation = first.message.conversation
    report = Artifact.objects.get(artifact_id="research_report")
    artifact_edit(branch=branch_shown(conversation=conversation), artifact=report, content=EDITED, base_version=1)
    return conversation


def _follow_up(conversation, content="And for a busy site?"):
    message = lifecycle.message_post(conversation=conversation, content=content, enqueue=False)
    run = message.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_the_leads_next_prompt_names_a_persons_edit_with_its_diff(user, scripted_model):
    conversation = _report_edited_by_a_person(user, scripted_model)
    scripted_model.requests.clear()
    scripted_model.add(Text("Noted."))

    _follow_up(conversation)

    system = scripted_model.requests[0]["messages"][0]["content"]
    edited_at = timezone.localtime(ArtifactVersion.objects.get(version=2).created_at)
    assert "# Changed by people" in system
    assert (
        f"- `research_report` (version 2, after version 1): edited by {user.get_username()} "
        f"at {edited_at:%H:%M}: +2 lines, −0 in “Risks”"
    ) in system
    assert f"  + {TEAM_NOTE}" in system
    assert "keep their text" in system


def test_once_an_agent_saves_the_artifact_its_edit_is_no_longer_news(user, scripted_model):
    conversation = _report_edited_by_a_person(user, scripted_model)
    scripted_model.add(
        Text(call("update_artifact", id="research_report", old_str="## Findings", new_str="## Findings (checked)")),
        Text("Updated."),
    )
    _follow_up(conversation)
    scripted_model.requests.clear()
    scripted_model.add(Text("Nothing new."))

    _follow_up(conversation, "Anything else?")

    assert "# Changed by people" not in scripted_model.requests[0]["messages"][0]["content"]


def test_a_rewrite_that_drops_a_persons_text_is_told_to_the_model_and_the_user(user, scripted_model):
    conversation = _report_edited_by_a_person(user, scripted_model)
    scripted_model.add(
        Text(call("rewrite_artifact", id="research_report", content="# WAL report\n\nAll new.\n")), Text("Rewrote it.")
    )

    run = _follow_up(conversation)

    told = scripted_model.requests[-1]["messages"][-1]["content"]
    assert "left out 2 lines a person wrote" in told and TEAM_NOTE in told
    [step] = [step for step in run_activity(run=run).steps if step.tool == "rewrite_artifact"]
    assert any("left out 2 lines a person wrote" in note for note in step.notes)
    report = Artifact.objects.get(artifact_id="research_report")
    assert report.current_version == 3 and TEAM_NOTE not in report.content
    assert {key: report.metadata["conflict"][key] for key in ("version", "overlapped", "writer", "kind")} == {
        "version": 3,
        "overlapped": 2,
        "writer": "agent",
        "kind": "dropped",
    }
    assert _events(run, RunEvent.Type.COMPLETE)[0].data["artifacts"]["dropped"] == ["research_report"]
    # Both texts are in the history.
    assert TEAM_NOTE in ArtifactVersion.objects.get(artifact=report, version=2).content


def test_a_rewrite_the_model_mends_after_the_warning_saves_with_no_conflict(user, scripted_model):
    conversation = _report_edited_by_a_person(user, scripted_model)
    scripted_model.add(
        Text(call("rewrite_artifact", id="research_report", content="# WAL report\n\nAll new.\n")),
        Text(
            call(
                "update_artifact",
                id="research_report",
                old_str="All new.",
                new_str=f"All new.\n\n## Risks\n\n{TEAM_NOTE}",
            )
        ),
        Text("Rewrote it, keeping the team's note."),
    )

    run = _follow_up(conversation)

    mended = scripted_model.requests[-1]["messages"][-1]["content"]
    assert "left out" not in mended
    report = Artifact.objects.get(artifact_id="research_report")
    assert TEAM_NOTE in report.content and "conflict" not in report.metadata
    assert _events(run, RunEvent.Type.COMPLETE)[0].data["artifacts"]["dropped"] == []


THOUGHT = "用户问的是 WAL。先确认定义，再举例子。" * 6


def _thinking_streamed(run) -> str:
    return "".join(e.data.get("reasoning", "") for e in _events(run, RunEvent.Type.LLM_CHUNK))


def test_thinking_streams_live_apart_from_the_answer_and_its_tokens_are_counted(user, scripted_model, settings):
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.05
    scripted_model.add(Text("WAL 是预写日志。", reasoning=THOUGHT, chunk_size=4, delay=0.02))

    run = _run(user, content="WAL 是什么？")

    chunks = _events(run, RunEvent.Type.LLM_CHUNK)
    assert _thinking_streamed(run) == THOUGHT
    # Live: the thinking comes in rows of its own before the answer does, not at the end.
    assert chunks[0].data["reasoning"] and not chunks[0].data["content"]
    assert "".join(e.data["content"] for e in chunks) == "WAL 是预写日志。"
    assert run.message.response == "WAL 是预写日志。"
    complete = _events(run, RunEvent.Type.LLM_COMPLETE)[0].data
    assert complete["reasoning"] == THOUGHT and complete["content"] == "WAL 是预写日志。"
    assert 0 <= complete["reasoning_ms"] <= complete["duration_ms"]
    # The service reported no details: the thinking is estimated.
    assert run.metrics["agent_executions"][0]["token_usage"]["reasoning_tokens"] == tokens_estimate(text=THOUGHT)


def test_the_thinking_tokens_the_service_reports_are_the_ones_counted(user, scripted_model):
    scripted_model.add(Text("Answer.", reasoning=THOUGHT, reasoning_field="reasoning", reasoning_tokens=321))

    run = _run(user)

    assert _thinking_streamed(run) == THOUGHT
    assert run.metrics["agent_executions"][0]["token_usage"]["reasoning_tokens"] == 321


def test_inline_thinking_is_shown_but_never_sent_back_to_the_model_as_its_answer(user, scripted_model):
    create = call("create_artifact", id="notes", content="WAL 笔记", title="笔记")
    scripted_model.add(
        Text(f"<think>{THOUGHT}</think>\n\nI will take notes.\n{create}", chunk_size=5),
        Text("<think>笔记写好了，可以回答。</think>WAL 是预写日志。", chunk_size=3),
    )

    run = _run(user)

    assert _thinking_streamed(run) == THOUGHT + "笔记写好了，可以回答。"
    streamed = "".join(e.data["content"] for e in _events(run, RunEvent.Type.LLM_CHUNK))
    assert "think>" not in streamed and "I will take notes." in streamed
    again = scripted_model.requests[1]["messages"]
    assert again[-2] == {"role": "assistant", "content": f"I will take notes.\n{create}"}
    assert not any(THOUGHT[:10] in (m.get("content") or "") for m in again)
    assert run.message.response == "WAL 是预写日志。"
    first, second = (e.data for e in _events(run, RunEvent.Type.LLM_COMPLETE))
    assert first["reasoning"] == THOUGHT and second["reasoning"] == "笔记写好了，可以回答。"
    assert all(record["token_usage"]["reasoning_tokens"] for record in run.metrics["agent_executions"])


def test_a_stream_asked_again_shows_its_thinking_afresh(user, scripted_model):
    scripted_model.add(Drop("<think>想了一半"), Text("<think>重新想过。</think>答案。"))

    run = _run(user)

    complete = _events(run, RunEvent.Type.LLM_COMPLETE)[0].data
    assert complete["reasoning"] == "重新想过。" and run.message.response == "答案。"
    retry = _events(run, RunEvent.Type.LLM_RETRY)[0]
    after = [e for e in _events(run, RunEvent.Type.LLM_CHUNK) if e.seq > retry.seq]
    assert "".join(e.data.get("reasoning", "") for e in after) == "重新想过。"


def test_a_turn_in_a_project_searches_its_library_and_one_outside_does_not(user, scripted_model):
    project = ProjectFactory(owner=user)
    document = LibraryDocumentFactory(title="热泵报价", content="主流机型售价约12万元。", project=project)

    def searched(conversation):
        scripted_model.reset()
        scripted_model.add(
            Text(call("call_subagent", agent="search_agent", instruction="查找热泵报价")),
            Text(call("web_search", query="热泵报价")),
            Text("Found what there was."),
            Text("Done."),
        )
        run_execute(run_id=conversation.active_branch.runs.get().pk)
        return scripted_model.requests[2]["messages"][-1]["content"]

    inside = lifecycle.conversation_start(user=user, content="热泵报价？", project=project, enqueue=False)
    outside = lifecycle.conversation_start(user=user, content="热泵报价？", enqueue=False)

    assert document.url in searched(inside)
    assert document.url not in searched(outside)
