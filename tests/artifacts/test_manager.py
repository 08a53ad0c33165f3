import json
import re

import pytest
from django.core.cache import cache
from django.db import OperationalError, connection

from agents.models import Run
from agents.selectors import session_active_runs
from artifacts import selectors, services
from artifacts.branches import branch_at
from artifacts.manager import ArtifactError, ArtifactManager
from artifacts.models import Artifact, ArtifactVersion
from tests.factories import MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

PLAN = "# Plan\n\n- [ ] search\n- [ ] read\n- [ ] write\n"


@pytest.fixture
def branch():
    message = MessageFactory()
    return branch_at(session=message.conversation.artifact_session, message_id=message.pk)


def _read(branch):
    """The branch as a page reads it, over the turns in progress now."""
    active_runs = session_active_runs(session_id=branch.session.pk)
    return branch_at(session=branch.session, message_id=branch.leaf_id, active_runs=active_runs)


def _saved(session, artifact_id="task_plan"):
    artifact = Artifact.objects.get(session=session, artifact_id=artifact_id)
    return artifact, list(artifact.versions.values_list("version", "content"))


def test_changes_stay_in_memory_until_the_flush(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="task_plan", content=PLAN)
    manager.update(artifact_id="task_plan", old_str="- [ ] search", new_str="- [x] search")

    assert not Artifact.objects.exists()
    assert manager.read(artifact_id="task_plan")["content"].startswith("# Plan\n\n- [x] search")


def test_a_turn_that_updates_the_task_plan_three_times_writes_one_version(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="task_plan", content=PLAN, title="Plan")
    for step in ("search", "read", "write"):
        manager.update(artifact_id="task_plan", old_str=f"- [ ] {step}", new_str=f"- [x] {step}")

    report = manager.flush_all()

    artifact, versions = _saved(branch.session)
    assert report.flushed == ["task_plan"] and not report.failed
    assert versions == [(4, PLAN.replace("[ ]", "[x]"))]
    assert (artifact.current_version, artifact.content, artifact.title) == (4, PLAN.replace("[ ]", "[x]"), "Plan")
    assert artifact.versions.get().update_type == "create"


def test_versions_are_sparse_across_turns(branch):
    first = ArtifactManager(branch=branch)
    first.create(artifact_id="task_plan", content=PLAN)
    first.flush_all()

    second = ArtifactManager(branch=branch)
    second.update(artifact_id="task_plan", old_str="- [ ] search", new_str="- [x] search")
    second.update(artifact_id="task_plan", old_str="- [ ] read", new_str="- [x] read")
    second.flush_all()

    artifact, versions = _saved(branch.session)
    assert [v for v, _ in versions] == [1, 3]
    latest = artifact.versions.get(version=3)
    assert latest.update_type == "update"
    assert latest.changes == [["- [ ] search", "- [x] search"], ["- [ ] read", "- [x] read"]]


def test_a_flush_with_nothing_changed_writes_nothing(branch):
    ArtifactManager(branch=branch).create(artifact_id="a", content="x")  # never flushed: lost with its run
    manager = ArtifactManager(branch=branch)
    assert manager.flush_all().flushed == []
    assert not ArtifactVersion.objects.exists()


def test_create_refuses_an_id_that_exists_in_memory_or_saved(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="report.md", content="v1")
    with pytest.raises(ArtifactError, match="already exists"):
        manager.create(artifact_id="report.md", content="again")
    manager.flush_all()
    with pytest.raises(ArtifactError, match="already exists"):
        ArtifactManager(branch=branch).create(artifact_id="report.md", content="again")


@pytest.mark.parametrize(
    "bad_id", ["", "../x", "a/b", ".hidden", "x" * 201, "sp ace", "report\n", "report\r\n", "report\n\n", "报告\u2028"]
)
def test_create_refuses_ids_that_are_not_names(branch, bad_id):
    with pytest.raises(ArtifactError, match="artifact id"):
        ArtifactManager(branch=branch).create(artifact_id=bad_id, content="x")


def test_ids_of_any_script_are_names(branch):
    manager = ArtifactManager(branch=branch)
    for artifact_id in ("报告_第一版.md", "task_plan", "_draft", "x" * 200):
        manager.create(artifact_id=artifact_id, content="x")
    manager.flush_all()

    assert Artifact.objects.filter(session=branch.session).count() == 4


@pytest.mark.parametrize(
    ("title", "content_type", "error"),
    [
        ("标" * 301, "text/markdown", "A title is at most 300 characters; this one has 301."),
        ("Report\nX-Injected: 1", "text/markdown", "A title is one line of text"),
        ("Report", "text/mcschema\r\nX-Injected: 1", "A content type is a media type of at most 100"),
        ("Report", "text/" + "x" * 96, "A content type is a media type of at most 100"),
        ("Report", "markdown", "A content type is a media type"),
        ("Report", "text/html; charset=utf-8\n", "A content type is a media type"),
        ("Report", 'text/html; x="<script>"', "A content type is a media type"),
    ],
)
def test_create_refuses_titles_and_content_types_that_cannot_be_stored_or_sent(branch, title, content_type, error):
    manager = ArtifactManager(branch=branch)
    with pytest.raises(ArtifactError, match=re.escape(error)):
        manager.create(artifact_id="report", content="x", title=title, content_type=content_type)
    manager.flush_all()

    assert not Artifact.objects.exists()


def test_titles_and_content_types_at_their_bounds_are_stored_as_given(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="a", content="x", title="标" * 300, content_type="text/" + "x" * 95)
    manager.create(artifact_id="b", content="x", title="报告 第一版", content_type="text/plain; charset=utf-8")
    manager.flush_all()

    stored = list(Artifact.objects.order_by("artifact_id").values_list("title", "content_type"))
    assert stored == [("标" * 300, "text/" + "x" * 95), ("报告 第一版", "text/plain; charset=utf-8")]


def test_a_models_title_keeps_nothing_that_hides_or_reorders_text(branch):
    manager = ArtifactManager(branch=branch)
    # Would read "报告exe.fdp" with the override.
    change = manager.create(artifact_id="report", content="x", title="报告\u202epdf.exe\u2066\u200f\u200b\ufeff")
    manager.create(artifact_id="tabbed", content="x", title="Tab\tapart")
    manager.create(artifact_id="hidden", content="x", title="\u202e\u200b\u061c")
    manager.flush_all()

    # What the tool tells the model is what is stored.
    assert change.artifact.title == "报告pdf.exe"
    stored = dict(Artifact.objects.values_list("artifact_id", "title"))
    assert stored == {"report": "报告pdf.exe", "tabbed": "Tab apart", "hidden": "hidden"}
    assert dict(ArtifactVersion.objects.values_list("artifact__artifact_id", "title")) == stored


def test_a_refused_update_changes_nothing(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="notes", content="same\nsame\n")
    with pytest.raises(ArtifactError, match="2"):
        manager.update(artifact_id="notes", old_str="same", new_str="other")
    assert (manager.read(artifact_id="notes")["content"], manager.read(artifact_id="notes")["version"]) == (
        "same\nsame\n",
        1,
    )
    with pytest.raises(ArtifactError, match="no artifact"):
        manager.update(artifact_id="missing", old_str="a", new_str="b")


def test_rewrite_replaces_everything_and_read_can_name_a_saved_version(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="report", content="draft")
    manager.flush_all()
    manager.rewrite(artifact_id="report", content="final")

    assert manager.read(artifact_id="report")["content"] == "final"
    assert manager.read(artifact_id="report", version=1)["content"] == "draft"
    with pytest.raises(ArtifactError, match="no saved version 2"):
        manager.read(artifact_id="report", version=2)


def _fail_first_writes(table, times):
    calls = {"left": times}

    def wrapper(execute, sql, params, many, context):
        if calls["left"] and sql.startswith("INSERT") and table in sql:
            calls["left"] -= 1
            raise OperationalError("database is locked")
        return execute(sql, params, many, context)

    return wrapper


def test_a_flush_whose_first_attempt_fails_still_saves_everything(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="task_plan", content=PLAN)
    manager.create(artifact_id="report", content="# Report")

    with connection.execute_wrapper(_fail_first_writes("artifacts_artifactversion", times=1)):
        report = manager.flush_all()

    assert sorted(report.flushed) == ["report", "task_plan"] and not report.failed
    assert ArtifactVersion.objects.count() == 2
    assert Artifact.objects.get(artifact_id="task_plan").content == PLAN


def test_an_artifact_that_cannot_be_saved_is_reported_and_the_others_are_saved(branch):
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="task_plan", content=PLAN)
    manager.create(artifact_id="report", content="# Report")

    def refuse_report(execute, sql, params, many, context):
        if sql.startswith("INSERT") and 'artifacts_artifact"' in sql and "report" in map(str, params or ()):
            raise OperationalError("disk I/O error")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse_report):
        report = manager.flush_all()

    assert report.flushed == ["task_plan"]
    assert "disk I/O error" in report.failed["report"]
    assert list(Artifact.objects.values_list("artifact_id", flat=True)) == ["task_plan"]


def test_a_user_edit_racing_an_agent_flush_keeps_both_texts(branch):
    seed = ArtifactManager(branch=branch)
    seed.create(artifact_id="report", content="base")
    seed.flush_all()
    agent = ArtifactManager(branch=branch)
    agent.update(artifact_id="report", old_str="base", new_str="agent text")
    artifact = Artifact.objects.get(artifact_id="report")

    services.artifact_edit(branch=branch, artifact=artifact, content="user text", base_version=1)
    report = agent.flush_all()

    artifact, versions = _saved(branch.session, "report")
    assert report.conflicts == ["report"]
    assert versions == [(1, "base"), (2, "user text"), (3, "agent text")]
    assert artifact.content == "agent text"
    assert artifact.metadata["conflict"]["writer"] == "agent"
    assert artifact.metadata["conflict"]["overlapped"] == 2


def test_a_user_edit_based_on_a_version_an_agent_flush_replaced_saves_nothing(branch):
    seed = ArtifactManager(branch=branch)
    seed.create(artifact_id="report", content="base")
    seed.flush_all()
    loaded = Artifact.objects.get(artifact_id="report")  # the user opens the editor on version 1
    agent = ArtifactManager(branch=branch)
    agent.rewrite(artifact_id="report", content="agent text")
    agent.flush_all()

    with pytest.raises(services.ChangedMeanwhile) as refused:
        services.artifact_edit(branch=branch, artifact=loaded, content="user text", base_version=1)

    assert refused.value.theirs.version == 2
    artifact, versions = _saved(branch.session, "report")
    assert versions == [(1, "base"), (2, "agent text")]
    assert "conflict" not in artifact.metadata


def test_the_live_view_shows_a_running_turns_unsaved_work(branch):
    run = RunFactory(message_id=branch.leaf_id, status=Run.Status.RUNNING)
    manager = ArtifactManager(branch=branch, run_id=run.pk)
    manager.create(artifact_id="task_plan", content=PLAN)
    manager.flush_all()
    manager.update(artifact_id="task_plan", old_str="- [ ] search", new_str="- [x] search")
    manager.create(artifact_id="draft", content="not saved yet")

    live_plan = selectors.artifact_get(branch=_read(branch), artifact_id="task_plan")
    listed = {v.artifact_id: v for v in selectors.artifact_list(branch=_read(branch))}

    assert live_plan.live and "- [x] search" in live_plan.content and live_plan.version == 2
    assert [v.version for v in selectors.artifact_versions(artifact=live_plan.saved, branch=branch)] == [1]
    assert listed["draft"].live and listed["draft"].saved is None
    assert list(listed) == ["task_plan", "draft"]

    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    ended = selectors.artifact_get(branch=_read(branch), artifact_id="task_plan")
    assert not ended.live and "- [ ] search" in ended.content
    assert selectors.artifact_get(branch=_read(branch), artifact_id="draft") is None


def test_the_flush_ends_the_live_view(branch):
    run = RunFactory(message_id=branch.leaf_id, status=Run.Status.RUNNING)
    manager = ArtifactManager(branch=branch, run_id=run.pk)
    manager.create(artifact_id="task_plan", content=PLAN)
    manager.flush_all()

    view = selectors.artifact_get(branch=branch, artifact_id="task_plan")
    assert not view.live and view.saved is not None


def test_changes_are_announced(branch):
    seen = []
    manager = ArtifactManager(branch=branch, on_change=lambda: seen.append("changed"))
    manager.create(artifact_id="a", content="x")
    manager.flush_all()
    assert seen == ["changed", "changed"]


# --- checkpoints ------------------------------------------------------------------

# About 200 KB, every line distinct so that each edit matches one place.
LARGE = "".join(f"- [ ] item {n}: {'words ' * 30}\n" for n in range(1100))


def _tick(manager, *numbers, artifact_id="report"):
    for n in numbers:
        manager.update(artifact_id=artifact_id, old_str=f"- [ ] item {n}:", new_str=f"- [x] item {n}:")


def _ticked(text, *numbers):
    for n in numbers:
        text = text.replace(f"- [ ] item {n}:", f"- [x] item {n}:")
    return text


def _through_a_checkpoint(manager, branch):
    """A manager of a resumed run: the working state went through the
    checkpoint's JSON, and the cache is empty."""
    state = json.loads(json.dumps(manager.working_state()))
    cache.clear()
    resumed = ArtifactManager(branch=branch)
    resumed.restore(state)
    return resumed, state


def test_small_edits_of_a_large_artifact_checkpoint_small_and_restore_whole(branch):
    seed = ArtifactManager(branch=branch)
    seed.create(artifact_id="report", content=LARGE)
    seed.flush_all()
    manager = ArtifactManager(branch=branch)
    _tick(manager, *range(10))

    resumed, state = _through_a_checkpoint(manager, branch)

    assert len(LARGE) > 200_000 and len(json.dumps(state)) < 2_000
    assert resumed.read(artifact_id="report") == manager.read(artifact_id="report")
    assert resumed.read(artifact_id="report")["content"] == _ticked(LARGE, *range(10))
    _tick(resumed, 10)
    resumed.flush_all()
    artifact, versions = _saved(branch.session, "report")
    assert [v for v, _ in versions] == [1, 12] and artifact.content == _ticked(LARGE, *range(11))
    assert artifact.versions.get(version=12).changes == [[f"- [ ] item {n}:", f"- [x] item {n}:"] for n in range(11)]


def test_a_created_or_rewritten_artifact_checkpoints_its_text_once_and_the_edits_after_it(branch):
    seed = ArtifactManager(branch=branch)
    seed.create(artifact_id="saved", content="old text")
    seed.flush_all()
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="report", content=LARGE)
    manager.rewrite(artifact_id="saved", content=LARGE)
    _tick(manager, 1, 2)
    _tick(manager, 3, artifact_id="saved")

    resumed, state = _through_a_checkpoint(manager, branch)

    whole = len(json.dumps(LARGE))
    assert whole * 2 < len(json.dumps(state)) < whole * 2 + 1_000
    assert resumed.read(artifact_id="report")["content"] == _ticked(LARGE, 1, 2)
    assert resumed.read(artifact_id="saved")["content"] == _ticked(LARGE, 3)
    resumed.flush_all()
    assert _saved(branch.session, "report")[1] == [(3, _ticked(LARGE, 1, 2))]
    assert _saved(branch.session, "saved")[1] == [(1, "old text"), (3, _ticked(LARGE, 3))]


def test_a_user_edit_while_the_worker_was_dead_is_kept_beside_the_restored_work(branch):
    seed = ArtifactManager(branch=branch)
    seed.create(artifact_id="report", content=LARGE)
    seed.flush_all()
    manager = ArtifactManager(branch=branch)
    _tick(manager, 1)
    state = manager.working_state()
    artifact = Artifact.objects.get(artifact_id="report")
    services.artifact_edit(branch=branch, artifact=artifact, content="the user's text", base_version=1)

    resumed = ArtifactManager(branch=branch)
    resumed.restore(state)
    report = resumed.flush_all()

    assert report.conflicts == ["report"]
    assert _saved(branch.session, "report")[1] == [(1, LARGE), (2, "the user's text"), (3, _ticked(LARGE, 1))]


def test_a_checkpoint_of_whole_working_copies_still_restores(branch):
    """The format before splices: a run paused or killed during an upgrade."""
    seed = ArtifactManager(branch=branch)
    seed.create(artifact_id="report", content="- [ ] item 1: a\n")
    seed.flush_all()
    lock_version = 2  # the artifact's, then: any number, for one the turn had read
    old_format = [
        {
            "artifact_id": "report",
            "content_type": "text/markdown",
            "title": "report",
            "content": "- [x] item 1: a\n",
            "source": "agent",
            "version": 2,
            "base_lock_version": lock_version,
            "update_type": "update",
            "changes": [["- [ ] item 1:", "- [x] item 1:"]],
            "dirty": True,
        },
        {
            "artifact_id": "notes",
            "content_type": "text/markdown",
            "title": "Notes",
            "content": "- [ ] item 2: b\n",
            "source": "agent",
            "version": 1,
            "base_lock_version": None,
            "update_type": "create",
            "changes": [],
            "dirty": True,
        },
    ]

    resumed = ArtifactManager(branch=branch)
    resumed.restore(old_format)
    _tick(resumed, 2, artifact_id="notes")
    again, _ = _through_a_checkpoint(resumed, branch)
    again.flush_all()

    assert _saved(branch.session, "report")[1] == [(1, "- [ ] item 1: a\n"), (2, "- [x] item 1: a\n")]
    assert _saved(branch.session, "notes")[1] == [(2, "- [x] item 2: b\n")]
    assert Artifact.objects.get(artifact_id="notes").title == "Notes"


NOTE = "团队备注：每晚运行检查点。"


def _edited_by_a_person(branch):
    """The agents' report (version 1) with a line the user added (version 2)."""
    seed = ArtifactManager(branch=branch, run_id=RunFactory(message_id=branch.leaf_id).pk)
    seed.create(artifact_id="report", content="# Report\n\nbase\n")
    seed.flush_all()
    artifact = Artifact.objects.get(artifact_id="report")
    services.artifact_edit(branch=branch, artifact=artifact, content=f"# Report\n\nbase\n{NOTE}\n", base_version=1)


def test_a_rewrite_without_a_persons_lines_is_told_and_saved_as_a_conflict(branch):
    _edited_by_a_person(branch)
    agent = ArtifactManager(branch=branch, run_id=RunFactory(message_id=branch.leaf_id).pk)

    change = agent.rewrite(artifact_id="report", content="# Report\n\nnew\n")
    report = agent.flush_all()

    assert change.dropped == [NOTE]
    assert report.dropped == ["report"] and report.conflicts == []
    artifact, versions = _saved(branch.session, "report")
    assert [number for number, _ in versions] == [1, 2, 3] and NOTE in versions[1][1]
    assert artifact.metadata["conflict"] | {"at": None} == {
        "version": 3,
        "overlapped": 2,
        "writer": "agent",
        "kind": "dropped",
        "at": None,
    }


def test_an_update_that_keeps_the_persons_lines_is_no_conflict(branch):
    _edited_by_a_person(branch)
    agent = ArtifactManager(branch=branch, run_id=RunFactory(message_id=branch.leaf_id).pk)

    change = agent.update(artifact_id="report", old_str="base", new_str="base, checked")
    report = agent.flush_all()

    assert change.dropped == [] and report.dropped == []
    assert "conflict" not in Artifact.objects.get(artifact_id="report").metadata


def test_a_person_editing_during_the_turn_is_an_overlap_not_a_drop(branch):
    _edited_by_a_person(branch)
    agent = ArtifactManager(branch=branch, run_id=RunFactory(message_id=branch.leaf_id).pk)
    agent.rewrite(artifact_id="report", content="# Report\n\nnew\n")
    artifact = Artifact.objects.get(artifact_id="report")
    services.artifact_edit(branch=branch, artifact=artifact, content=f"{NOTE}\nmore\n", base_version=2)

    report = agent.flush_all()

    assert report.conflicts == ["report"] and report.dropped == []
    conflict = Artifact.objects.get(artifact_id="report").metadata["conflict"]
    assert (conflict["kind"], conflict["overlapped"], conflict["version"]) == ("overlap", 3, 4)


def test_the_task_plan_rewritten_for_a_new_request_is_no_conflict(branch):
    seed = ArtifactManager(branch=branch, run_id=RunFactory(message_id=branch.leaf_id).pk)
    seed.create(artifact_id="task_plan", content=PLAN)
    seed.flush_all()
    services.artifact_edit(
        branch=branch,
        artifact=Artifact.objects.get(artifact_id="task_plan"),
        content=PLAN + "- [ ] 也看看成本\n",
        base_version=1,
    )
    agent = ArtifactManager(branch=branch, run_id=RunFactory(message_id=branch.leaf_id).pk)
    # The lead is told of the edit all the same.
    assert list(agent.people_edits()) == ["task_plan"]

    change = agent.rewrite(artifact_id="task_plan", content="# New plan\n\n- [ ] other\n")
    report = agent.flush_all()

    assert change.dropped == [] and report.dropped == []
    assert "conflict" not in Artifact.objects.get(artifact_id="task_plan").metadata
