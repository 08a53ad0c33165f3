"""How versions are named: by their place on the branch shown, which a person
can follow, with the artifact's own number, which counts every branch's."""

import pytest
from django.utils import timezone

from agents.models import Run
from agents.selectors import session_active_runs
from artifacts import selectors
from artifacts.branches import branch_at
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from artifacts.services import artifact_version_save
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def fork():
    """A first question answered twice: the conversation, its root and the two branches' messages."""
    conversation = ConversationFactory()
    root = MessageFactory(conversation=conversation, content="热泵还是燃气？")
    left = MessageFactory(conversation=conversation, parent=root, content="And for a flat?")
    right = MessageFactory(conversation=conversation, parent=root, content="And for a house?")
    return conversation, root, left, right


def _written(conversation, artifact_id, messages, *, run=None) -> Artifact:
    """An artifact whose versions 1, 2, … were written at `messages`, in order (None: on every branch)."""
    artifact = Artifact.objects.create(
        session=conversation.artifact_session, artifact_id=artifact_id, current_version=0
    )
    for number, message in enumerate(messages, start=1):
        artifact_version_save(
            artifact=artifact,
            content=f"报告 第{number}版",
            version=number,
            update_type="update",
            message_id=message.pk if message else None,
            run_id=run.pk if run else None,
        )
    return artifact


def _named(names: dict) -> dict[int, str]:
    return {number: str(name) for number, name in names.items()}


def test_two_branches_writing_in_turn_count_their_own_versions(fork):
    conversation, root, left, right = fork
    report = _written(conversation, "report", [root, left, right, left, right, left])
    session = conversation.artifact_session

    on_left = selectors.version_names(artifact=report, branch=branch_at(session=session, message_id=left.pk))
    on_right = selectors.version_names(artifact=report, branch=branch_at(session=session, message_id=right.pk))

    assert _named(on_left) == {
        1: "version 1 on this branch (v1)",
        2: "version 2 on this branch (v2)",
        3: "v3 · other branch",
        4: "version 3 on this branch (v4)",
        5: "v5 · other branch",
        6: "version 4 on this branch (v6)",
    }
    assert _named(on_right) == {
        1: "version 1 on this branch (v1)",
        2: "v2 · other branch",
        3: "version 2 on this branch (v3)",
        4: "v4 · other branch",
        5: "version 3 on this branch (v5)",
        6: "v6 · other branch",
    }


def test_a_version_on_every_branch_counts_on_each(fork):
    conversation, _, left, right = fork
    # Version 1 was saved before the first question; version 3 before versions recorded a message.
    report = _written(conversation, "report", [None, left, None, right])
    session = conversation.artifact_session

    on_left = selectors.version_names(artifact=report, branch=branch_at(session=session, message_id=left.pk))
    on_right = selectors.version_names(artifact=report, branch=branch_at(session=session, message_id=right.pk))

    assert [name.ordinal for name in on_left.values()] == [1, 2, 3, None]
    assert [name.ordinal for name in on_right.values()] == [1, None, 2, 3]


def test_45_versions_are_named_in_one_query(fork, django_assert_num_queries):
    conversation, root, left, right = fork
    # Turn by turn: two on the left for every one on the right.
    report = _written(conversation, "report", [root] + [left, left, right] * 15)
    branch = branch_at(session=conversation.artifact_session, message_id=left.pk)

    with django_assert_num_queries(1):
        names = selectors.version_names(artifact=report, branch=branch)

    assert len(names) == 46
    assert str(names[46]) == "v46 · other branch"
    assert str(names[45]) == "version 31 on this branch (v45)"
    assert [names[n].ordinal for n in (1, 2, 3, 4, 5, 6, 7)] == [1, 2, 3, None, 4, 5, None]


def test_the_pane_list_and_the_history_agree_on_the_names(fork, django_assert_num_queries):
    conversation, root, left, right = fork
    report = _written(conversation, "report", [root] + [left, left, right] * 15)
    _written(conversation, "notes", [right, left])
    branch = branch_at(session=conversation.artifact_session, message_id=left.pk)

    with django_assert_num_queries(1):
        heads = {view.artifact_id: str(view.name) for view in selectors.artifact_list(branch=branch)}
    history = selectors.artifact_versions(artifact=report, branch=branch)

    assert heads == {"report": "version 31 on this branch (v45)", "notes": "version 1 on this branch (v2)"}
    assert [str(version.name) for version in history[:3]] == [
        "v46 · other branch",
        "version 31 on this branch (v45)",
        "version 30 on this branch (v44)",
    ]
    assert history[0].where == "“And for a house?”" and history[1].where == "turn 2"
    assert history[-1].where == "turn 1"


def test_a_working_copy_is_the_version_after_the_branchs_newest_and_unsaved(fork):
    conversation, root, left, right = fork
    _written(conversation, "report", [root, right, left])
    run = RunFactory(message=left, status=Run.Status.RUNNING)
    session = conversation.artifact_session
    turn = ArtifactManager(branch=branch_at(session=session, message_id=left.pk), run_id=run.pk)
    turn.rewrite(artifact_id="report", content="报告 进行中")
    turn.create(artifact_id="notes", content="笔记")
    page = branch_at(session=session, message_id=left.pk, active_runs=session_active_runs(session_id=session.pk))

    shown = {view.artifact_id: str(view.name) for view in selectors.artifact_list(branch=page)}

    assert shown == {"report": "version 3 on this branch (unsaved)", "notes": "version 1 on this branch (unsaved)"}


def test_a_runs_versions_and_the_versions_it_read_are_found_in_one_query(fork, django_assert_num_queries):
    conversation, root, left, right = fork
    run = RunFactory(message=left)
    _written(conversation, "plan", [root, left], run=run)
    report = _written(conversation, "report", [root, right, left])
    report.versions.filter(version=3).update(run=run)
    branch = branch_at(session=conversation.artifact_session, message_id=left.pk)

    with django_assert_num_queries(1):
        found = selectors.run_versions(
            branch=branch, run_id=run.pk, named=[("report", 1), ("report", 2), ("gone", 1)], saved_by=timezone.now()
        )

    assert sorted((v.artifact_id, str(v.name), v.by_run) for v in found) == [
        ("plan", "version 1 on this branch (v1)", True),
        ("plan", "version 2 on this branch (v2)", True),
        ("report", "v2 · other branch", False),
        ("report", "version 1 on this branch (v1)", False),
        ("report", "version 2 on this branch (v3)", True),
    ]
