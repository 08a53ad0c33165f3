"""Artifacts follow the conversation tree: each branch sees, of every artifact,
its newest version written on the branch."""

import re
from importlib import import_module

import pytest
from django.apps import apps
from django.urls import reverse

from agents.models import Run, RunEvent
from agents.selectors import branch_shown_live
from agents.services.execution import run_execute
from artifacts import selectors, services
from artifacts.branches import branch_at, branch_shown
from artifacts.manager import ArtifactError, ArtifactManager
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from artifacts.pane import NO_SUCH_ARTIFACT
from conversations import lifecycle
from conversations import services as conversation_services
from conversations.models import Conversation
from tests.agents.test_engine import call
from tests.artifacts.test_views import HTMX
from tests.factories import ConversationFactory, MessageFactory, RunFactory, UserFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db

PLAN_HEAT = "- [x] compare heat pumps\n- [ ] write the report"
PLAN_SOLAR = "- [x] compare solar panels\n- [ ] write the report"


def _turn(conversation, *, content, parent=lifecycle.ACTIVE_BRANCH):
    message = lifecycle.message_post(conversation=conversation, content=content, parent=parent, enqueue=False)
    run_execute(run_id=message.runs.get().pk)
    return message


def _writes(plan, report):
    """A lead's turn that plans, writes its report and answers."""
    return (
        Text(call("create_artifact", id="task_plan", content=plan)),
        Text(call("create_artifact", id="report", content=report, title=report.splitlines()[0])),
        Text("Done."),
    )


def _plan_in_prompt(request) -> str | None:
    system = request["messages"][0]["content"]
    found = re.search(r"# Current task plan \(artifact task_plan, version \d+\)\n\n(.*?)(?:\n\n#|\Z)", system, re.S)
    return found[1] if found else None


@pytest.fixture
def two_branches(user, scripted_model):
    """The first question asked twice, each answer with its own plan and report."""
    scripted_model.add(*_writes(PLAN_HEAT, "Heat pumps\n\nHeat pumps win."))
    conversation = lifecycle.conversation_start(user=user, content="Heat pumps or gas?", enqueue=False)
    heat = conversation.active_branch
    run_execute(run_id=heat.runs.get().pk)
    scripted_model.add(*_writes(PLAN_SOLAR, "Solar\n\nSolar wins."))
    solar = _turn(conversation, content="Solar or gas?", parent=None)
    return conversation, heat, solar


def test_each_branch_builds_its_own_report_and_its_lead_sees_only_its_own_plan(two_branches, scripted_model):
    conversation, heat, solar = two_branches
    first_turn_of_solar = scripted_model.requests[3]
    # The edited question started from nothing: no plan, no artifacts.
    assert _plan_in_prompt(first_turn_of_solar) is None
    assert "This conversation has no artifacts yet." in first_turn_of_solar["messages"][0]["content"]
    # Creating the ids the other branch has is no "already exists".
    created = RunEvent.objects.filter(run__message=solar, type=RunEvent.Type.TOOL_COMPLETE).values_list(
        "data", flat=True
    )
    assert [data["success"] for data in created] == [True, True]

    scripted_model.add(Text("Follow-up on solar."))
    _turn(conversation, content="And for a flat?")
    assert _plan_in_prompt(scripted_model.requests[-1]) == PLAN_SOLAR

    conversation_services.branch_switch(conversation=conversation, message=heat)
    scripted_model.add(Text("Follow-up on heat pumps."))
    _turn(conversation, content="And for a house?")
    sent = scripted_model.requests[-1]["messages"][0]["content"]
    assert _plan_in_prompt(scripted_model.requests[-1]) == PLAN_HEAT
    assert "Heat pumps win." in sent and "Solar wins." not in sent

    report = Artifact.objects.get(artifact_id="report")
    assert list(report.versions.values_list("version", "message_id")) == [(1, heat.pk), (2, solar.pk)]
    # The artifact's own text is the newest on any branch, as seed 000 keeps it.
    assert report.content == "Solar\n\nSolar wins."


def test_switching_branches_switches_the_pane_and_keeps_the_artifact_shown(two_branches, signed_in):
    conversation, heat, solar = two_branches
    url = reverse("branch-switch", args=[conversation.pk])
    page = conversation.get_absolute_url()

    response = signed_in.post(
        url, {"message": heat.pk}, **HTMX, HTTP_HX_CURRENT_URL=f"http://testserver{page}?artifact=report&version=2"
    )

    html = response.content.decode()
    pane = html[html.index('id="artifact-pane"') :]
    assert 'hx-swap-oob="outerHTML"' in pane[:200]
    assert "Heat pumps win." in pane and "Solar wins." not in pane
    assert response["HX-Push-Url"] == f"{page}?artifact=report"
    solar_pane = signed_in.post(url, {"message": solar.pk}, **HTMX).content.decode()
    assert "Solar wins." in solar_pane and "Heat pumps win." not in solar_pane


def test_an_artifact_of_another_branch_does_not_exist_on_this_one(user, signed_in):
    conversation = ConversationFactory(owner=user)
    MessageFactory(conversation=conversation)
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.create(artifact_id="notes", content="first's notes")
    manager.flush_all()
    second = MessageFactory(conversation=conversation, parent=None)

    other = branch_shown(conversation=conversation)
    assert other.leaf_id == second.pk
    assert selectors.artifact_list(branch=other) == []
    with pytest.raises(ArtifactError, match="no artifact 'notes'"):
        ArtifactManager(branch=other).update(artifact_id="notes", old_str="first", new_str="second")
    for name in ("artifact-detail", "artifact-raw", "artifact-export-docx", "artifact-edit"):
        assert signed_in.get(reverse(name, args=[conversation.pk, "notes"])).status_code == 404
    page = signed_in.get(conversation.get_absolute_url() + "?artifact=notes").content.decode()
    assert NO_SUCH_ARTIFACT in page and "first&#x27;s notes" not in page


def test_versions_record_who_wrote_them_on_which_branch(user, signed_in, scripted_model, media_root):
    scripted_model.add(Text(call("create_artifact", id="report", content="# Agent's")), Text("Done."))
    conversation = lifecycle.conversation_start(user=user, content="Write a report", enqueue=False)
    message = conversation.active_branch
    run = message.runs.get()
    run_execute(run_id=run.pk)
    branch = branch_shown(conversation=conversation)

    services.artifact_upload(branch=branch, filename="data.csv", data=b"a,b\n1,2\n")
    services.artifact_edit(
        branch=branch, artifact=Artifact.objects.get(artifact_id="report"), content="# Mine", base_version=1
    )

    rows = ArtifactVersion.objects.order_by("pk").values_list(
        "artifact__artifact_id", "update_type", "message_id", "run_id"
    )
    assert list(rows) == [
        ("report", "create", message.pk, run.pk),
        ("data.csv", "upload", None, None),
        ("report", "user_edit", message.pk, None),
    ]


def test_an_upload_after_asking_is_on_a_branch_made_by_editing_the_question_and_its_edits_are_not(user, media_root):
    conversation = ConversationFactory(owner=user)
    asked = MessageFactory(conversation=conversation, content="比较热泵和燃气锅炉")
    shown = branch_shown(conversation=conversation)
    upload = services.artifact_upload(branch=shown, filename="数据.csv", data="年份,价格\n2024,3\n".encode())
    services.artifact_edit(branch=shown, artifact=upload, content="年份,价格\n2024,4\n", base_version=1)
    edited = MessageFactory(conversation=conversation, parent=None, content="比较太阳能和燃气锅炉")
    other = branch_shown(conversation=conversation)

    assert other.path == (edited.pk,)
    assert [(v.artifact_id, v.content) for v in selectors.artifact_list(branch=other)] == [
        (upload.artifact_id, "年份,价格\n2024,3\n")
    ]
    first = branch_at(session=conversation.artifact_session, message_id=asked.pk)
    assert [v.content for v in selectors.artifact_list(branch=first)] == ["年份,价格\n2024,4\n"]


def test_the_migration_puts_uploads_made_before_on_every_branch(user, media_root):
    conversation = ConversationFactory(owner=user)
    asked = MessageFactory(conversation=conversation)
    shown = branch_shown(conversation=conversation)
    upload = services.artifact_upload(branch=shown, filename="brief.md", data=b"# Brief")
    services.artifact_edit(branch=shown, artifact=upload, content="# Brief, edited", base_version=1)
    report = ArtifactManager(branch=shown)
    report.create(artifact_id="report", content="# Report")
    report.flush_all()
    # As an upload was recorded before this change: at the message the page showed.
    ArtifactVersion.objects.filter(update_type="upload").update(message=asked)

    import_module("artifacts.migrations.0005_uploads_on_every_branch").uploads_unbranch(apps, None)

    rows = ArtifactVersion.objects.order_by("pk").values_list("artifact__artifact_id", "version", "message_id")
    assert list(rows) == [("brief.md", 1, None), ("brief.md", 2, asked.pk), ("report", 1, asked.pk)]


def test_before_the_first_question_an_upload_is_on_every_branch(user, media_root):
    conversation = ConversationFactory(owner=user)
    services.artifact_upload(branch=branch_shown(conversation=conversation), filename="brief.md", data=b"# Brief")
    MessageFactory(conversation=conversation)
    one = branch_shown(conversation=conversation)
    MessageFactory(conversation=conversation, parent=None)
    other = branch_shown(conversation=conversation)

    assert one.path != other.path
    assert [v.artifact_id for v in selectors.artifact_list(branch=one)] == ["brief.md"]
    assert [v.artifact_id for v in selectors.artifact_list(branch=other)] == ["brief.md"]


def test_reading_a_conversation_made_without_its_session_writes_nothing_until_an_upload(
    user, media_root, django_assert_num_queries
):
    conversation = Conversation.objects.create(owner=user)

    with django_assert_num_queries(2):
        # The session looked for, and the artifacts of an empty branch.
        assert selectors.artifact_list(branch=branch_shown(conversation=conversation)) == []
    assert not ArtifactSession.objects.exists()

    services.artifact_upload(branch=branch_shown(conversation=conversation), filename="brief.md", data=b"# Brief")
    assert [v.artifact_id for v in selectors.artifact_list(branch=branch_shown(conversation=conversation))] == [
        "brief.md"
    ]


@pytest.fixture
def fork(user):
    """A first message with `report` v1, and two answers to it: two branches."""
    conversation = ConversationFactory(owner=user)
    root = MessageFactory(conversation=conversation)
    seed = ArtifactManager(branch=branch_shown(conversation=conversation))
    seed.create(artifact_id="report", content="v1")
    seed.flush_all()
    left = MessageFactory(conversation=conversation, parent=root)
    right = MessageFactory(conversation=conversation, parent=root)
    return conversation.artifact_session, root, left, right


def test_branches_number_their_versions_in_one_sequence_and_do_not_conflict(fork):
    session, root, left, right = fork
    # Both branches read version 1; the right one saves first.
    left_turn = ArtifactManager(branch=branch_at(session=session, message_id=left.pk))
    right_turn = ArtifactManager(branch=branch_at(session=session, message_id=right.pk))
    left_turn.rewrite(artifact_id="report", content="left")
    right_turn.rewrite(artifact_id="report", content="right")
    right_turn.flush_all()

    report = left_turn.flush_all()

    assert report.conflicts == []
    artifact = Artifact.objects.get(artifact_id="report")
    assert list(artifact.versions.values_list("version", "content", "message_id")) == [
        (1, "v1", root.pk),
        (2, "right", right.pk),
        (3, "left", left.pk),
    ]
    assert "conflict" not in artifact.metadata
    heads = {
        leaf: selectors.artifact_get(branch=branch_at(session=session, message_id=leaf), artifact_id="report")
        for leaf in (root.pk, left.pk, right.pk)
    }
    assert {leaf: (view.version, view.content) for leaf, view in heads.items()} == {
        root.pk: (1, "v1"),
        left.pk: (3, "left"),
        right.pk: (2, "right"),
    }
    # Reading a version by number stays on the branch.
    with pytest.raises(ArtifactError, match="no saved version 2 on this branch"):
        ArtifactManager(branch=branch_at(session=session, message_id=left.pk)).read(artifact_id="report", version=2)


def test_a_user_edit_on_the_turns_branch_is_a_conflict_and_on_another_is_not(fork):
    session, _, turn_message, elsewhere = fork
    artifact = Artifact.objects.get(artifact_id="report")
    turn = ArtifactManager(branch=branch_at(session=session, message_id=turn_message.pk))
    turn.rewrite(artifact_id="report", content="agent")

    services.artifact_edit(
        branch=branch_at(session=session, message_id=elsewhere.pk),
        artifact=artifact,
        content="other branch",
        base_version=1,
    )
    assert turn.flush_all().conflicts == []
    turn.rewrite(artifact_id="report", content="agent again")
    services.artifact_edit(
        branch=branch_at(session=session, message_id=turn_message.pk),
        artifact=artifact,
        content="user here",
        base_version=3,
    )
    assert turn.flush_all().conflicts == ["report"]


def test_a_running_turn_on_another_branch_is_not_shown(user, signed_in):
    conversation = ConversationFactory(owner=user)
    first = MessageFactory(conversation=conversation)
    seed = ArtifactManager(branch=branch_shown(conversation=conversation))
    seed.create(artifact_id="report", content="saved")
    seed.flush_all()
    run = RunFactory(message=MessageFactory(conversation=conversation, parent=first), status=Run.Status.RUNNING)
    turn = ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk)
    turn.rewrite(artifact_id="report", content="being written")
    turn.create(artifact_id="draft", content="new")

    here = selectors.artifact_list(branch=branch_shown_live(conversation=conversation))
    conversation_services.branch_switch(
        conversation=conversation, message=MessageFactory(conversation=conversation, parent=first, shown=False)
    )
    there = selectors.artifact_list(branch=branch_shown_live(conversation=conversation))

    assert [(v.artifact_id, v.content, v.live) for v in here] == [
        ("report", "being written", True),
        ("draft", "new", True),
    ]
    assert [(v.artifact_id, v.content, v.live) for v in there] == [("report", "saved", False)]


def test_the_history_lists_every_branchs_versions_and_diffs_across_them(two_branches, signed_in):
    conversation, _, _ = two_branches
    detail = reverse("artifact-detail", args=[conversation.pk, "report"])

    html = signed_in.get(detail, **HTMX).content.decode()
    diff = signed_in.get(
        reverse("artifact-diff", args=[conversation.pk, "report"]) + "?from=1&to=2", **HTMX
    ).content.decode()
    old = signed_in.get(detail + "?version=1", **HTMX).content.decode()

    assert "version 1 on this branch (v2) · turn 1 · create" in html
    assert "v1 · other branch · “Heat pumps or gas?” · create" in html
    assert '<span class="diff-sign">-</span>Heat pumps win.</div>' in diff
    assert '<span class="diff-sign">+</span>Solar wins.</div>' in diff
    assert "written on another branch" in old and "Restore this version" in old


def test_another_users_ids_are_a_404_on_branch_views(two_branches, client):
    conversation, heat, _ = two_branches
    client.force_login(UserFactory())
    assert (
        client.post(reverse("branch-switch", args=[conversation.pk]), {"message": heat.pk}, **HTMX).status_code == 404
    )
    assert client.get(reverse("artifact-detail", args=[conversation.pk, "report"])).status_code == 404
