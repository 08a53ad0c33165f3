"""Planning and applying cleanups (artifacts/cleanup.py), on real rows and real files."""

import importlib
import os
import time
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.utils import timezone

from agents.models import Run
from agents.selectors import conversations_busy
from agents.services.execution import run_execute
from artifacts import services
from artifacts.branches import branch_shown
from artifacts.cleanup import (
    CHANGED,
    GONE,
    ORPHAN_GRACE,
    SESSION_ACTIVE,
    cleanup_apply,
    cleanup_plan,
)
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from conversations import lifecycle
from conversations.models import Conversation
from tests.factories import ArtifactFactory, ConversationFactory, MessageFactory, RunFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db


def _call(name, **params):
    body = "".join(f"<{key}>{value}</{key}>" for key, value in params.items())
    return f"<tool_call>\n  <name>{name}</name>\n  <params>{body}</params>\n</tool_call>"


def _ids(candidates):
    return [candidate.artifact_id for candidate in candidates]


def _days_ago(days):
    return timezone.now() - timedelta(days=days)


def _upload(conversation, filename="chart.png", data=b"\x89PNG\r\n\x1a\n" + b"\0" * 100):
    return services.artifact_upload(branch=branch_shown(conversation=conversation), filename=filename, data=data)


def _stray_file(media_root, name, *, age=ORPHAN_GRACE * 2):
    path = media_root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"left behind")
    then = time.time() - age.total_seconds()
    os.utime(path, (then, then))
    return path


def test_a_result_a_turn_stores_for_being_too_long_is_a_run_artifact_and_the_only_default_candidate(
    user, scripted_model, settings
):
    settings.TOOL_RESULT_MAX_CHARS = 1000
    report = "WAL lets readers and a writer work at once. " * 50
    scripted_model.add(
        Text(_call("create_artifact", id="summary", content="# Summary")),
        Text(_call("call_subagent", agent="search_agent", instruction="Find sources on WAL")),
        Text(report, chunk_size=500),
        Text("See search_agent_report_1."),
    )
    conversation = lifecycle.conversation_start(user=user, content="Research WAL", enqueue=False)
    run_execute(run_id=conversation.active_branch.runs.get().pk)

    stored = Artifact.objects.get(artifact_id="search_agent_report_1")
    assert stored.source == Artifact.Source.RUN
    assert Artifact.objects.get(artifact_id="summary").source == Artifact.Source.AGENT
    plan = cleanup_plan(busy=conversations_busy())
    assert _ids(plan.candidates) == ["search_agent_report_1"]
    assert plan.candidates[0].conversation_id == conversation.pk
    assert plan.candidates[0].bytes == 2 * len(stored.content.encode())


def test_an_artifacts_bytes_are_its_text_every_versions_text_in_utf8_and_its_file(conversation):
    ArtifactFactory(
        session=conversation.artifact_session,
        artifact_id="web_fetch_result_1",
        content="日本語",
        versions=["draft", "草稿"],
    )
    upload = _upload(conversation, data=b"x" * 1000)

    sizes = {
        candidate.artifact_id: candidate.bytes
        for candidate in cleanup_plan(busy=conversations_busy(), include_all=True).candidates
    }

    assert sizes == {"web_fetch_result_1": 9 + 5 + 6 + 9, upload.artifact_id: 1000}


def test_only_run_artifacts_are_candidates_unless_include_all(conversation):
    session = conversation.artifact_session
    ArtifactFactory(session=session, artifact_id="web_fetch_result_1")
    ArtifactFactory(session=session, artifact_id="report", source=Artifact.Source.AGENT, content_type="text/markdown")
    upload = _upload(conversation)

    assert _ids(cleanup_plan(busy=conversations_busy()).candidates) == ["web_fetch_result_1"]
    assert sorted(_ids(cleanup_plan(busy=conversations_busy(), include_all=True).candidates)) == sorted(
        ["web_fetch_result_1", "report", upload.artifact_id]
    )


def test_older_than_takes_only_what_last_changed_before_then(conversation):
    session = conversation.artifact_session
    ArtifactFactory(session=session, artifact_id="old_result_1", updated_at=_days_ago(31))
    ArtifactFactory(session=session, artifact_id="recent_result_1", updated_at=_days_ago(29))

    assert _ids(cleanup_plan(busy=conversations_busy(), older_than_days=30).candidates) == ["old_result_1"]
    assert _ids(cleanup_plan(busy=conversations_busy(), older_than_days=0).candidates) == [
        "old_result_1",
        "recent_result_1",
    ]


def test_max_bytes_takes_the_oldest_first_and_stops_at_the_first_that_would_pass_it(conversation):
    session = conversation.artifact_session
    # 100 bytes each: the text and its one version.
    for days, artifact_id in ((3, "a_result_1"), (2, "b_result_1"), (1, "c_result_1")):
        ArtifactFactory(session=session, artifact_id=artifact_id, content="x" * 50, updated_at=_days_ago(days))
    ArtifactFactory(session=session, artifact_id="small_result_1", content="", updated_at=_days_ago(0))

    plan = cleanup_plan(busy=conversations_busy(), max_bytes=250)

    assert _ids(plan.candidates) == ["a_result_1", "b_result_1"] and plan.bytes == 200
    # The small one would fit, but a pass frees the oldest first, no gaps.
    assert _ids(plan.over_limit) == ["c_result_1", "small_result_1"]
    assert _ids(cleanup_plan(busy=conversations_busy(), max_bytes=200).candidates) == ["a_result_1", "b_result_1"]
    assert cleanup_plan(busy=conversations_busy(), max_bytes=99).candidates == []


@pytest.mark.parametrize("status", Run.ACTIVE_STATUSES)
def test_a_conversation_with_a_turn_in_progress_is_refused_and_none_of_its_artifacts_is_a_candidate(status):
    busy, idle, quiet = ConversationFactory(), ConversationFactory(), ConversationFactory()
    ArtifactFactory(session=busy.artifact_session, artifact_id="busy_result_1")
    ArtifactFactory(session=idle.artifact_session, artifact_id="idle_result_1")
    RunFactory(message=MessageFactory(conversation=busy), status=status)
    RunFactory(message=MessageFactory(conversation=idle), status=Run.Status.COMPLETED)
    RunFactory(message=MessageFactory(conversation=quiet), status=status)

    plan = cleanup_plan(busy=conversations_busy())

    assert _ids(plan.candidates) == ["idle_result_1"]
    # A busy conversation with nothing to clean is no news, unless it was named.
    assert plan.refused == [(busy.pk, SESSION_ACTIVE)]
    assert cleanup_plan(busy=conversations_busy(), conversation_ids=[str(quiet.pk)]).refused == [
        (quiet.pk, SESSION_ACTIVE)
    ]


def test_a_plan_for_named_conversations_leaves_the_others_alone(conversation):
    other = ConversationFactory()
    ArtifactFactory(session=conversation.artifact_session, artifact_id="mine_result_1")
    ArtifactFactory(session=other.artifact_session, artifact_id="theirs_result_1")

    assert _ids(cleanup_plan(busy=conversations_busy(), conversation_ids=[str(conversation.pk)]).candidates) == [
        "mine_result_1"
    ]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"conversation_ids": ["../../etc/passwd"]}, "'../../etc/passwd' is not a conversation id (a UUID)."),
        ({"conversation_ids": ["1; DROP TABLE artifacts_artifact"]}, "is not a conversation id"),
        (
            {"conversation_ids": ["00000000-0000-0000-0000-000000000000"]},
            "There is no conversation 00000000-0000-0000-0000-000000000000.",
        ),
        ({"older_than_days": -1}, "older_than_days cannot be negative"),
        ({"max_bytes": -5}, "max_bytes cannot be negative"),
    ],
)
def test_unknown_ids_and_negative_limits_are_refused_with_a_reason(arguments, message):
    with pytest.raises(ValidationError) as refused:
        cleanup_plan(busy=conversations_busy(), **arguments)

    assert message in refused.value.messages[0]


def test_apply_removes_exactly_the_plans_candidates_with_their_versions_and_files(
    conversation, media_root, django_capture_on_commit_callbacks
):
    session = conversation.artifact_session
    ArtifactFactory(session=session, artifact_id="web_fetch_result_1", versions=["v1"])
    ArtifactFactory(session=session, artifact_id="report", source=Artifact.Source.AGENT)
    upload = _upload(conversation)
    stored = media_root / upload.file.name
    plan = cleanup_plan(busy=conversations_busy())

    with django_capture_on_commit_callbacks(execute=True):
        report = cleanup_apply(busy=conversations_busy(), plan=plan)

    assert report.removed == plan.candidates and report.skipped == [] and report.bytes == plan.bytes > 0
    assert set(Artifact.objects.values_list("artifact_id", flat=True)) == {"report", upload.artifact_id}
    assert set(ArtifactVersion.objects.values_list("artifact__artifact_id", flat=True)) == {
        "report",
        upload.artifact_id,
    }
    assert stored.exists()

    with django_capture_on_commit_callbacks(execute=True):
        report = cleanup_apply(
            busy=conversations_busy(), plan=cleanup_plan(busy=conversations_busy(), include_all=True)
        )

    assert sorted(_ids(report.removed)) == sorted(["report", upload.artifact_id])
    assert not Artifact.objects.exists() and not ArtifactVersion.objects.exists() and not stored.exists()


def test_apply_skips_what_was_deleted_changed_or_got_a_running_turn_since_the_plan(conversation):
    session = conversation.artifact_session
    for artifact_id in ("gone_result_1", "changed_result_1", "untouched_result_1"):
        ArtifactFactory(session=session, artifact_id=artifact_id, updated_at=_days_ago(1))
    busy = ConversationFactory()
    ArtifactFactory(session=busy.artifact_session, artifact_id="busy_result_1", updated_at=_days_ago(1))
    plan = cleanup_plan(busy=conversations_busy())

    services.artifact_delete(artifact=Artifact.objects.get(artifact_id="gone_result_1"), active_runs=())
    services.artifact_edit(
        branch=branch_shown(conversation=conversation),
        artifact=Artifact.objects.get(artifact_id="changed_result_1"),
        content="kept by the user",
        base_version=1,
    )
    RunFactory(message=MessageFactory(conversation=busy), status=Run.Status.RUNNING)
    report = cleanup_apply(busy=conversations_busy(), plan=plan)

    assert _ids(report.removed) == ["untouched_result_1"]
    assert {candidate.artifact_id: reason for candidate, reason in report.skipped} == {
        "gone_result_1": GONE,
        "changed_result_1": CHANGED,
        "busy_result_1": SESSION_ACTIVE,
    }
    assert set(Artifact.objects.values_list("artifact_id", flat=True)) == {"changed_result_1", "busy_result_1"}


def test_a_file_no_artifact_refers_to_is_reported_and_deleted_only_when_asked(conversation, media_root):
    upload = _upload(conversation)
    os.utime(media_root / upload.file.name, (0, 0))
    directory = f"artifacts/{conversation.pk}"
    stray = _stray_file(media_root, f"{directory}/crashed_upload.pdf")
    _stray_file(media_root, f"{directory}/being_uploaded.png", age=timedelta(minutes=1))
    gone_conversation = _stray_file(media_root, "artifacts/6d7bd0a5-5a4e-4a9c-9c1e-2d1a1a1a1a1a/old.png")

    plan = cleanup_plan(busy=conversations_busy())
    named = cleanup_plan(busy=conversations_busy(), conversation_ids=[conversation.pk])

    assert plan.orphaned_files == sorted(
        [f"{directory}/crashed_upload.pdf", "artifacts/6d7bd0a5-5a4e-4a9c-9c1e-2d1a1a1a1a1a/old.png"]
    )
    assert plan.orphaned_bytes == 2 * len(b"left behind")
    assert named.orphaned_files == [f"{directory}/crashed_upload.pdf"]
    cleanup_apply(busy=conversations_busy(), plan=plan)
    assert stray.exists() and gone_conversation.exists()

    report = cleanup_apply(busy=conversations_busy(), plan=plan, delete_orphans=True)

    assert report.orphans_deleted == plan.orphaned_files
    assert not stray.exists() and not gone_conversation.exists()
    assert (media_root / upload.file.name).exists()


def test_an_orphan_an_artifact_took_up_since_the_plan_is_kept(conversation, media_root):
    stray = _stray_file(media_root, f"artifacts/{conversation.pk}/notes.pdf")
    plan = cleanup_plan(busy=conversations_busy())
    ArtifactFactory(session=conversation.artifact_session, file=plan.orphaned_files[0])

    report = cleanup_apply(busy=conversations_busy(), plan=plan, delete_orphans=True)

    assert report.orphans_deleted == [] and stray.exists()


def test_planning_a_thousand_conversations_takes_a_few_queries(user, django_assert_max_num_queries):
    conversations = Conversation.objects.bulk_create(ConversationFactory.build_batch(1000, owner=user))
    sessions = ArtifactSession.objects.bulk_create(ArtifactSession(conversation=c) for c in conversations)
    artifacts = Artifact.objects.bulk_create(
        ArtifactFactory.build(session=session, source=source, content="x" * 10)
        for session in sessions
        for source in (Artifact.Source.RUN, Artifact.Source.RUN, Artifact.Source.AGENT)
    )
    ArtifactVersion.objects.bulk_create(
        ArtifactVersion(artifact=artifact, version=number, content="y" * 10, update_type="create")
        for artifact in artifacts
        for number in (1, 2)
    )
    RunFactory(message=MessageFactory(conversation=conversations[0]), status=Run.Status.RUNNING)

    with django_assert_max_num_queries(4):
        plan = cleanup_plan(busy=conversations_busy(), older_than_days=0)

    assert len(plan.candidates) == 2 * 999 and plan.bytes == 2 * 999 * 30
    assert plan.refused == [(conversations[0].pk, SESSION_ACTIVE)]


def test_the_migration_marks_the_results_the_engine_stored_before_as_run_artifacts(conversation):
    session = conversation.artifact_session
    agent = {"source": Artifact.Source.AGENT}
    for artifact_id in ("web_fetch_result_1", "search_agent_report_12"):
        ArtifactFactory(session=session, artifact_id=artifact_id, **agent)
    ArtifactFactory(session=session, artifact_id="report", **agent)
    ArtifactFactory(session=session, artifact_id="draft_result_1", content_type="text/markdown", **agent)
    ArtifactFactory(session=session, artifact_id="sheet_result_1", source=Artifact.Source.USER_UPLOAD)
    migration = importlib.import_module("artifacts.migrations.0003_artifact_source_run")

    migration.spilled_results_mark(apps, None)

    assert dict(Artifact.objects.values_list("artifact_id", "source")) == {
        "web_fetch_result_1": "run",
        "search_agent_report_12": "run",
        "report": "agent",
        "draft_result_1": "agent",
        "sheet_result_1": "user_upload",
    }
