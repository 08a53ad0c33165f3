import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from artifacts import services
from artifacts.branches import branch_at
from artifacts.edits import DIFF_MAX_LINES, people_edits
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from tests.factories import MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

REPORT = "# 报告\n\n## 发现\n\nWAL 让读者不阻塞写者。\n\n## Sources\n\n- sqlite.org\n"


@pytest.fixture
def message():
    return MessageFactory()


def _branch(message):
    return branch_at(session=message.conversation.artifact_session, message_id=message.pk)


def _agent_writes(message, artifact_id, content, *, create=False):
    manager = ArtifactManager(branch=_branch(message), run_id=RunFactory(message=message).pk)
    if create:
        manager.create(artifact_id=artifact_id, content=content)
    else:
        manager.rewrite(artifact_id=artifact_id, content=content)
    manager.flush_all()


def _person_edits(message, artifact_id, content):
    branch = _branch(message)
    artifact = Artifact.objects.get(artifact_id=artifact_id)
    head = artifact.versions.order_by("-version").first()
    return services.artifact_edit(branch=branch, artifact=artifact, content=content, base_version=head.version)


def test_an_agents_own_versions_are_no_persons_edit(message):
    _agent_writes(message, "report", REPORT, create=True)
    _agent_writes(message, "report", REPORT + "\nMore.\n")

    assert people_edits(branch=_branch(message)) == {}


def test_a_persons_edits_since_the_agents_version_are_summed_up_with_their_section(message):
    _agent_writes(message, "report", REPORT, create=True)
    _person_edits(
        message, "report", REPORT.replace("WAL 让读者不阻塞写者。", "WAL 让读者不阻塞写者。\n团队备注：每晚检查点。")
    )
    _person_edits(message, "report", _branch_text(message) + "\n## Risks\n\nDisk fills up.\n")

    [edit] = people_edits(branch=_branch(message)).values()

    assert (edit.artifact_id, edit.since_version, edit.version) == ("report", 1, 3)
    assert (edit.added, edit.removed) == (3, 0)
    assert edit.sections == ["发现", "Risks"]
    assert edit.summary == "+3 lines, −0 in “发现”, “Risks”"
    assert edit.diff == "+ 团队备注：每晚检查点。\n+ ## Risks\n+ Disk fills up."
    assert edit.lines == ["团队备注：每晚检查点。", "## Risks", "Disk fills up."]
    assert edit.dropped_from(REPORT) == edit.lines
    assert edit.dropped_from(_branch_text(message)) == []


def _branch_text(message):
    return Artifact.objects.get(artifact_id="report").content


def test_an_edit_undone_by_the_person_is_no_edit(message):
    _agent_writes(message, "report", REPORT, create=True)
    _person_edits(message, "report", REPORT + "oops\n")
    _person_edits(message, "report", REPORT)

    assert people_edits(branch=_branch(message)) == {}


def test_an_upload_is_where_the_persons_edits_start(message):
    services.artifact_upload(branch=_branch(message), filename="notes.md", data=REPORT.encode())
    assert people_edits(branch=_branch(message)) == {}

    _person_edits(message, "notes.md", REPORT + "Added by hand.\n")

    [edit] = people_edits(branch=_branch(message)).values()
    assert edit.since_version == 1 and edit.lines == ["Added by hand."]


def test_only_the_branchs_own_edits_count(message):
    _agent_writes(message, "report", REPORT, create=True)
    sibling = MessageFactory(conversation=message.conversation, parent=message.parent)
    child = MessageFactory(conversation=message.conversation, parent=message)
    _person_edits(child, "report", REPORT + "On the child branch.\n")

    assert people_edits(branch=_branch(sibling)) == {}
    assert people_edits(branch=_branch(message)) == {}
    assert list(people_edits(branch=_branch(child))) == ["report"]


def test_a_long_edit_is_counted_but_not_shown_and_a_huge_one_not_compared(message):
    _agent_writes(message, "report", REPORT, create=True)
    _person_edits(message, "report", REPORT + "".join(f"第 {n} 行\n" for n in range(DIFF_MAX_LINES + 1)))
    [edit] = people_edits(branch=_branch(message)).values()
    assert edit.added == DIFF_MAX_LINES + 1 and edit.diff == ""

    huge = "".join(f"line {n}\n" for n in range(25_000))
    _person_edits(message, "report", huge)
    [edit] = people_edits(branch=_branch(message)).values()
    assert (edit.added, edit.removed, edit.diff, edit.lines) == (25_000, _lines(REPORT), "", [])


def _lines(text):
    return len(text.splitlines())


def test_every_artifact_of_a_long_conversation_in_three_queries(message):
    for n in range(30):
        _agent_writes(message, f"report_{n}", REPORT, create=True)
        _person_edits(message, f"report_{n}", REPORT + f"Note {n}.\n")

    with CaptureQueriesContext(connection) as queries:
        edits = people_edits(branch=_branch(message))

    assert len(edits) == 30 and edits["report_29"].lines == ["Note 29."]
    # The branch's path is one query; the versions and the edited texts one each.
    assert len(queries) <= 3
