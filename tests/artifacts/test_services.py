"""What users do to artifacts: upload beside a running turn, and delete."""

import re

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from agents.models import Run
from agents.selectors import branch_shown_live
from artifacts import selectors, services
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactVersion
from artifacts.pane import edit_conflict
from tests.artifacts.test_views import HTMX, _flushed
from tests.bounded import computes_within
from tests.factories import MessageFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("cache_lost", [False, True])
def test_an_upload_named_like_an_artifact_the_turn_is_writing_gets_a_suffix(
    conversation, running, media_root, cache_lost
):
    run, manager = running
    # What the worker saves after each step; with the cache gone, it is what says so.
    Run.objects.filter(pk=run.pk).update(checkpoint={"artifacts": manager.working_state()})
    if cache_lost:
        cache.clear()

    upload = services.artifact_upload(
        branch=branch_shown_live(conversation=conversation),
        filename="report.md",
        data=b"# Mine",
    )
    manager.flush_all()

    assert upload.artifact_id == "report_1.md"
    assert Artifact.objects.get(artifact_id="report.md").content == "the agent's report"
    assert Artifact.objects.get(artifact_id="report_1.md").content == "# Mine"


def test_delete_asks_first_then_takes_every_version_on_every_branch(signed_in, conversation):
    MessageFactory(conversation=conversation)
    _flushed(conversation, "notes", "v1", "v2")
    MessageFactory(conversation=conversation, parent=None)
    _flushed(conversation, "notes", "v3 on the edited question's branch")
    url = reverse("artifact-delete", args=[conversation.pk, "notes"])

    asked = signed_in.get(url, **HTMX).content.decode()
    assert "Delete “notes”?" in asked
    assert "Its 3 versions go too, 2 of them on other branches of this conversation." in asked
    assert Artifact.objects.filter(artifact_id="notes").exists()

    done = signed_in.post(url, **HTMX)
    assert done.status_code == 200 and "Deleted notes." in done.content.decode()
    assert not Artifact.objects.exists() and not ArtifactVersion.objects.exists()


def test_delete_removes_an_uploaded_file_from_storage(
    signed_in, conversation, media_root, django_capture_on_commit_callbacks
):
    upload = services.artifact_upload(
        branch=branch_shown(conversation=conversation), filename="chart.png", data=b"\x89PNG\r\n\x1a\n"
    )
    stored = media_root / upload.file.name
    assert stored.exists()

    with django_capture_on_commit_callbacks(execute=True):
        signed_in.post(reverse("artifact-delete", args=[conversation.pk, "chart.png"]), **HTMX)

    assert not stored.exists()


def test_delete_is_refused_while_a_turn_writes_the_artifact(signed_in, conversation, running):
    _, manager = running
    manager.flush_all()
    manager.rewrite(artifact_id="report.md", content="still writing")

    refused = signed_in.post(reverse("artifact-delete", args=[conversation.pk, "report.md"]), **HTMX)

    assert refused.status_code == 409
    assert services.ARTIFACT_BEING_WRITTEN in refused.content.decode()
    assert Artifact.objects.filter(artifact_id="report.md").exists()


def test_delete_needs_a_post_with_csrf_and_another_users_artifact_is_a_404(user, other_user, conversation):
    _flushed(conversation, "notes", "v1")
    url = reverse("artifact-delete", args=[conversation.pk, "notes"])
    theirs = Client()
    theirs.force_login(other_user)
    mine = Client(enforce_csrf_checks=True)
    mine.force_login(user)

    assert theirs.post(url).status_code == 404 and theirs.get(url).status_code == 404
    assert mine.post(url).status_code == 403
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', mine.get(url).content.decode())[1]
    assert mine.post(url, {"csrfmiddlewaretoken": token}).status_code == 200
    assert not Artifact.objects.exists()


def test_deleting_an_upload_from_another_branch_counts_only_its_edits_there_as_lost(
    signed_in, conversation, media_root, django_capture_on_commit_callbacks
):
    asked = MessageFactory(conversation=conversation, content="第一问")
    first = branch_shown(conversation=conversation)
    upload = services.artifact_upload(branch=first, filename="notes.md", data="# 笔记".encode())
    services.artifact_edit(branch=first, artifact=upload, content="# 笔记\n\n我的补充", base_version=1)
    MessageFactory(conversation=conversation, parent=None, content="第一问，改过")
    other = branch_shown(conversation=conversation)

    assert selectors.artifact_delete_scope(artifact=upload, branch=other) == selectors.DeleteScope(
        versions=2, elsewhere=1
    )
    first_scope = selectors.artifact_delete_scope(artifact=upload, branch=first)
    assert first_scope == selectors.DeleteScope(versions=2, elsewhere=0) and first.path == (asked.pk,)
    stored = media_root / upload.file.name
    with django_capture_on_commit_callbacks(execute=True):
        signed_in.post(reverse("artifact-delete", args=[conversation.pk, "notes.md"]), **HTMX)
    assert not Artifact.objects.exists() and not ArtifactVersion.objects.exists() and not stored.exists()


REPORT_ZH = "# 报告\n\n热泵在零下十度仍然有效。\n"


def _agent_saved_over(conversation, *, content):
    """The report at v1, which the user opened, and an agent's v2 saved while they edited."""
    branch = branch_shown(conversation=conversation)
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="report", content=REPORT_ZH)
    manager.flush_all()
    agent = ArtifactManager(branch=branch)
    agent.rewrite(artifact_id="report", content=content)
    agent.flush_all()
    return branch, Artifact.objects.get(artifact_id="report")


def _texts(artifact):
    return list(artifact.versions.order_by("version").values_list("content", flat=True))


def test_an_edit_on_a_version_the_branch_moved_on_from_saves_nothing(conversation):
    branch, artifact = _agent_saved_over(conversation, content="# 报告\n\n零下十五度。\n")

    with pytest.raises(services.ChangedMeanwhile) as refused:
        services.artifact_edit(branch=branch, artifact=artifact, content="我的文字", base_version=1)

    assert refused.value.theirs.version == 2 and refused.value.theirs.content == "# 报告\n\n零下十五度。\n"
    assert _texts(artifact) == [REPORT_ZH, "# 报告\n\n零下十五度。\n"]
    artifact.refresh_from_db()
    assert artifact.current_version == 2 and "conflict" not in artifact.metadata


def test_keep_mine_is_an_edit_on_their_version_and_asks_again_if_it_moved_on(conversation):
    branch, artifact = _agent_saved_over(conversation, content="第二稿")
    again = ArtifactManager(branch=branch)
    again.rewrite(artifact_id="report", content="第三稿")
    again.flush_all()

    with pytest.raises(services.ChangedMeanwhile) as refused:
        services.artifact_edit(branch=branch, artifact=artifact, content="我的文字", base_version=2)
    saved = services.artifact_edit(branch=branch, artifact=artifact, content="我的文字", base_version=3)

    assert refused.value.theirs.version == 3
    assert (saved.version, _texts(artifact)) == (4, [REPORT_ZH, "第二稿", "第三稿", "我的文字"])


def test_text_equal_to_theirs_is_no_conflict_and_no_version(conversation):
    branch, artifact = _agent_saved_over(conversation, content="第二稿")

    head = services.artifact_edit(branch=branch, artifact=artifact, content="第二稿", base_version=1)

    assert head.version == 2 and artifact.versions.count() == 2


def test_a_stale_restore_saves_nothing(conversation):
    branch, artifact = _agent_saved_over(conversation, content="第二稿")

    with pytest.raises(services.ChangedMeanwhile):
        services.artifact_restore(branch=branch, version=artifact.versions.get(version=1), base_version=1)
    restored = services.artifact_restore(branch=branch, version=artifact.versions.get(version=1), base_version=2)

    assert restored.update_type == "restore" and _texts(artifact) == [REPORT_ZH, "第二稿", REPORT_ZH]


def test_a_5000_line_artifact_conflicts_and_diffs_in_time(conversation):
    lines = [f"第 {n} 行：热泵的效率随室外温度变化。" for n in range(5000)]
    theirs = "\n".join([*lines[:2500], "代理改写的一行。", *lines[2501:]])
    branch, artifact = _agent_saved_over(conversation, content=theirs)
    mine = "\n".join([*lines[:4000], "我加的一行。", *lines[4000:]])

    with computes_within(seconds=2.0):
        with pytest.raises(services.ChangedMeanwhile) as refused:
            services.artifact_edit(branch=branch, artifact=artifact, content=mine, base_version=1)
        conflict = edit_conflict(theirs=refused.value.theirs, mine=mine)

    assert artifact.versions.count() == 2
    added = ["".join(text for text, _ in line.parts) for line in conflict.lines if line.kind == "add"]
    assert added == ["第 2500 行：热泵的效率随室外温度变化。", "我加的一行。"]


def test_the_agents_marker_is_cleared_only_for_its_version(conversation):
    _branch, artifact = _agent_saved_over(conversation, content="第二稿")
    artifact.metadata = {"conflict": {"version": 2, "overlapped": 1, "writer": "agent", "kind": "overlap"}}
    artifact.save()

    services.artifact_conflict_dismiss(artifact=artifact, version=1)
    kept = Artifact.objects.get(pk=artifact.pk).metadata
    services.artifact_conflict_dismiss(artifact=artifact, version=2)

    assert "conflict" in kept and "conflict" not in Artifact.objects.get(pk=artifact.pk).metadata


def test_discarded_texts_are_kept_one_per_artifact_the_newest_few():
    session = {}
    for number in range(services.DISCARDED_MAX_COUNT + 2):
        services.discarded_keep(session=session, conversation_id="c", artifact_id=f"a{number}", text=f"第{number}稿")
    services.discarded_keep(session=session, conversation_id="c", artifact_id="a6", text="新的")

    assert services.discarded_get(session=session, conversation_id="c", artifact_id="a1") is None
    assert services.discarded_get(session=session, conversation_id="c", artifact_id="a6") == "新的"
    assert services.discarded_get(session=session, conversation_id="other", artifact_id="a6") is None
    assert len(session[services.DISCARDED_KEY]) == services.DISCARDED_MAX_COUNT
    services.discarded_drop(session=session, conversation_id="c", artifact_id="a6")
    assert services.discarded_get(session=session, conversation_id="c", artifact_id="a6") is None
    with pytest.raises(ValidationError):
        services.discarded_keep(
            session=session, conversation_id="c", artifact_id="a", text="长" * (services.DISCARDED_MAX_CHARS + 1)
        )
