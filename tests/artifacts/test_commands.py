"""The `cleanup_artifacts` and `delete_artifact` commands, on real rows and real files."""

import os
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents.models import Run
from artifacts import services
from artifacts.branches import branch_shown
from artifacts.cleanup import SESSION_ACTIVE
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactVersion
from tests.factories import ArtifactFactory, ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

LISTED = re.compile(r"^(?:would remove|removed) (\S+) (\S+) \[", re.MULTILINE)


def _call(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def _state(media_root):
    """Every artifact and version row, and every stored file with its bytes."""
    return (
        list(Artifact.objects.order_by("pk").values()),
        list(ArtifactVersion.objects.order_by("pk").values()),
        {str(path.relative_to(media_root)): path.read_bytes() for path in media_root.rglob("*") if path.is_file()},
    )


def _days_ago(days):
    return timezone.now() - timedelta(days=days)


@pytest.fixture
def stored(conversation, media_root):
    """Run artifacts of two conversations, an agent's report, an upload, a
    busy conversation and a file left behind by a failed upload."""
    session = conversation.artifact_session
    ArtifactFactory(session=session, artifact_id="web_fetch_result_1", content="x" * 1000, updated_at=_days_ago(40))
    ArtifactFactory(session=session, artifact_id="search_agent_report_1", content="日本" * 100, updated_at=_days_ago(5))
    ArtifactFactory(session=session, artifact_id="report", source=Artifact.Source.AGENT, updated_at=_days_ago(50))
    upload = services.artifact_upload(
        branch=branch_shown(conversation=conversation), filename="data.bin", data=b"\1" * 2048
    )
    other = ConversationFactory()
    ArtifactFactory(session=other.artifact_session, artifact_id="web_fetch_result_1", content="y" * 10)
    busy = ConversationFactory()
    ArtifactFactory(session=busy.artifact_session, artifact_id="web_fetch_result_1")
    RunFactory(message=MessageFactory(conversation=busy), status=Run.Status.WAITING_PERMISSION)
    orphan = media_root / "artifacts" / str(conversation.pk) / "lost.pdf"
    orphan.write_bytes(b"%PDF" * 256)
    os.utime(orphan, (0, 0))
    return {"conversation": conversation, "other": other, "busy": busy, "upload": upload, "orphan": orphan}


def test_a_dry_run_lists_what_it_would_remove_and_changes_nothing(stored, media_root):
    conversation, other, busy = stored["conversation"], stored["other"], stored["busy"]
    before = _state(media_root)

    output = _call("cleanup_artifacts")

    assert _state(media_root) == before
    assert output.splitlines() == [
        "Dry run: nothing is removed. Run again with --apply to remove what is listed.",
        f"would remove {conversation.pk} web_fetch_result_1 [run] 2.0 KB (2000 bytes)",
        f"would remove {conversation.pk} search_agent_report_1 [run] 1.2 KB (1200 bytes)",
        f"would remove {other.pk} web_fetch_result_1 [run] 20 bytes (20 bytes)",
        f"refused {busy.pk}: {SESSION_ACTIVE}",
        f"orphaned file artifacts/{conversation.pk}/lost.pdf: kept (--delete-orphans deletes it)",
        "Orphaned files: 1, 1.0 KB (1024 bytes).",
        "Would free 3.1 KB (3220 bytes) from 3 artifacts.",
    ]


@pytest.mark.parametrize(
    "options",
    [[], ["--include-all"], ["--older-than", "30"], ["--max-bytes", "3000", "--include-all"], ["--delete-orphans"]],
)
def test_apply_removes_exactly_what_the_dry_run_listed(stored, media_root, options, django_capture_on_commit_callbacks):
    listed = LISTED.findall(_call("cleanup_artifacts", *options))
    remaining = {
        (str(session_id), artifact_id)
        for session_id, artifact_id in Artifact.objects.values_list("session_id", "artifact_id")
    } - set(listed)

    with django_capture_on_commit_callbacks(execute=True):
        output = _call("cleanup_artifacts", "--apply", *options)

    assert LISTED.findall(output) == listed and listed
    assert {
        (str(session_id), artifact_id)
        for session_id, artifact_id in Artifact.objects.values_list("session_id", "artifact_id")
    } == remaining
    assert stored["upload"].file.storage.exists(stored["upload"].file.name) == (
        (str(stored["conversation"].pk), stored["upload"].artifact_id) in remaining
    )
    assert stored["orphan"].exists() == ("--delete-orphans" not in options)


@pytest.mark.parametrize(
    "options, ids",
    [
        ([], ["web_fetch_result_1", "search_agent_report_1", "web_fetch_result_1"]),
        (
            ["--include-all"],
            ["report", "web_fetch_result_1", "search_agent_report_1", "data.bin", "web_fetch_result_1"],
        ),
        (["--older-than", "30", "--include-all"], ["report", "web_fetch_result_1"]),
        (["--max-bytes", "3199"], ["web_fetch_result_1"]),
    ],
)
def test_the_options_choose_the_candidates(stored, options, ids):
    assert [artifact_id for _, artifact_id in LISTED.findall(_call("cleanup_artifacts", *options))] == ids


def test_a_named_conversation_limits_the_cleanup_and_a_busy_one_is_refused(stored):
    conversation, busy = stored["conversation"], stored["busy"]

    output = _call(
        "cleanup_artifacts", "--conversation", str(conversation.pk), "--conversation", str(busy.pk), "--apply"
    )

    assert LISTED.findall(output) == [
        (str(conversation.pk), "web_fetch_result_1"),
        (str(conversation.pk), "search_agent_report_1"),
    ]
    assert f"refused {busy.pk}: {SESSION_ACTIVE}" in output
    assert output.endswith("Freed 3.1 KB (3200 bytes) from 2 artifacts.\n")
    assert Artifact.objects.filter(session=busy.artifact_session).exists()


def test_max_bytes_says_what_it_left_for_another_pass(stored):
    output = _call("cleanup_artifacts", "--max-bytes", "2000")

    assert "2 more candidates (1.2 KB (1220 bytes)) are past --max-bytes; a later pass takes them." in output
    assert output.endswith("Would free 2.0 KB (2000 bytes) from 1 artifacts.\n")


def test_orphans_are_deleted_only_with_delete_orphans_and_apply(stored):
    orphan, name = stored["orphan"], f"artifacts/{stored['conversation'].pk}/lost.pdf"

    assert f"orphaned file {name}: would be deleted" in _call("cleanup_artifacts", "--delete-orphans")
    assert orphan.exists()
    assert f"orphaned file {name}: deleted" in _call("cleanup_artifacts", "--delete-orphans", "--apply")
    assert not orphan.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--older-than", "-1"], "older_than_days cannot be negative (got -1)."),
        (["--max-bytes", "-1"], "max_bytes cannot be negative (got -1)."),
        (["--older-than", "soon"], "invalid int value: 'soon'"),
        (["--conversation", "../../media"], "'../../media' is not a conversation id (a UUID)."),
        (
            ["--conversation", "0c7a7f06-2bd0-4bd1-a5ef-6d3fa1f0bb4d"],
            "There is no conversation 0c7a7f06-2bd0-4bd1-a5ef-6d3fa1f0bb4d.",
        ),
    ],
)
def test_bad_arguments_are_errors_that_say_why(stored, media_root, args, message):
    before = _state(media_root)

    with pytest.raises(CommandError, match=re.escape(message)):
        _call("cleanup_artifacts", "--apply", *args)

    assert _state(media_root) == before


# --- delete_artifact ------------------------------------------------------------------


def test_delete_artifact_is_a_dry_run_until_apply_and_then_takes_the_file(
    stored, media_root, django_capture_on_commit_callbacks
):
    conversation, upload = stored["conversation"], stored["upload"]
    file = media_root / upload.file.name
    before = _state(media_root)

    dry = _call("delete_artifact", str(conversation.pk), "data.bin")

    assert _state(media_root) == before
    assert dry.splitlines() == [
        f"Would delete artifact data.bin (data.bin) [user_upload] of conversation {conversation.pk}, 2.0 KB (2048 bytes).",
        "Dry run: nothing was deleted. Run again with --apply to delete it.",
    ]

    with django_capture_on_commit_callbacks(execute=True):
        applied = _call("delete_artifact", str(conversation.pk), "data.bin", "--apply")

    assert applied.startswith("Deleted artifact data.bin")
    assert not Artifact.objects.filter(pk=upload.pk).exists() and not file.exists()
    assert Artifact.objects.filter(session=conversation.artifact_session).count() == 3


def test_delete_artifact_is_refused_while_a_turn_writes_it(conversation):
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    manager = ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk)
    manager.create(artifact_id="report", content="v1")
    manager.flush_all()
    manager.rewrite(artifact_id="report", content="still writing")

    with pytest.raises(CommandError, match=re.escape(services.ARTIFACT_BEING_WRITTEN)):
        _call("delete_artifact", str(conversation.pk), "report", "--apply")

    assert Artifact.objects.filter(artifact_id="report").exists()


@pytest.mark.parametrize(
    "conversation_id, artifact_id, message",
    [
        ("not-a-uuid", "report", "'not-a-uuid' is not a conversation id (a UUID)."),
        (
            "0c7a7f06-2bd0-4bd1-a5ef-6d3fa1f0bb4d",
            "report",
            "There is no conversation 0c7a7f06-2bd0-4bd1-a5ef-6d3fa1f0bb4d.",
        ),
        (None, "../../../etc/passwd", "has no artifact '../../../etc/passwd'."),
        (None, "nothing_here", "has no artifact 'nothing_here'."),
    ],
)
def test_delete_artifact_names_what_it_cannot_find(stored, conversation_id, artifact_id, message):
    conversation_id = conversation_id or str(stored["other"].pk)

    with pytest.raises(CommandError, match=re.escape(message)):
        _call("delete_artifact", conversation_id, artifact_id, "--apply")
