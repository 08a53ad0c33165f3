"""Forking: another person continues a branch in a conversation of their own,
with the branch's questions, answers and artifacts as they were, and the two
conversations go their own ways."""

import itertools

import pytest
from django.core.exceptions import ValidationError

from agents.selectors import ALLOWED_TOOLS
from agents.services import asking
from agents.services.execution import run_execute
from agents.services.forking import conversation_fork
from artifacts import selectors as artifact_selectors
from artifacts import services as artifact_services
from artifacts.branches import branch_shown
from artifacts.models import Artifact, ArtifactVersion
from conversations.models import Conversation, Message
from tests.agents.test_engine import call
from tests.artifacts import test_branches
from tests.artifacts.test_branches import PLAN_HEAT, _turn, _writes
from tests.factories import MessageFactory, message_chain
from tests.model_server import Text

pytestmark = pytest.mark.django_db

two_branches = test_branches.two_branches


def _texts(conversation):
    branch = branch_shown(conversation=conversation)
    return {item.artifact_id: item.content for item in artifact_selectors.artifact_list(branch=branch)}


def test_a_fork_holds_the_branch_shown_with_its_artifacts_and_says_where_it_came_from(two_branches, other_user):
    conversation, heat, _solar = two_branches

    fork = conversation_fork(user=other_user, conversation=conversation, message=heat)

    heat.refresh_from_db()
    assert fork.owner == other_user and fork.pk != conversation.pk
    assert (fork.forked_from, fork.forked_at) == (conversation, heat)
    assert fork.title == conversation.title
    copied = list(Message.objects.filter(conversation=fork))
    assert [(m.content, m.response) for m in copied] == [(heat.content, heat.response)]
    assert fork.active_branch == copied[0]
    # The heat branch's plan and report, not the solar branch's written later.
    texts = _texts(fork)
    assert texts["task_plan"] == PLAN_HEAT
    assert "Heat pumps win." in texts["report"] and "Solar" not in texts["report"]
    assert ArtifactVersion.objects.filter(artifact__session__conversation=fork, message=copied[0]).count() == 2
    # The original keeps its own.
    assert Message.objects.filter(conversation=conversation).count() == 2
    assert Artifact.objects.filter(session__conversation=conversation).count() == 2


def test_a_fork_stops_at_the_chosen_message_and_its_artifacts_at_that_point(user, other_user, scripted_model):
    scripted_model.add(*_writes("- [ ] 第一步", "报告\n\n第一版。"))
    conversation = asking.conversation_start(user=user, content="热泵和燃气哪个好？", enqueue=False)
    first = conversation.active_branch
    run_execute(run_id=first.runs.get().pk)
    scripted_model.add(
        Text(call("rewrite_artifact", id="report", content="报告\n\n第二版。")),
        Text("改好了。"),
    )
    second = _turn(conversation, content="再详细一点")
    scripted_model.add(Text("好的。"))
    _turn(conversation, content="谢谢")

    fork = conversation_fork(user=other_user, conversation=conversation, message=second)

    assert list(Message.objects.filter(conversation=fork).values_list("content", flat=True)) == [
        "热泵和燃气哪个好？",
        "再详细一点",
    ]
    report = Artifact.objects.get(session__conversation=fork, artifact_id="report")
    assert report.content == "报告\n\n第二版。"
    # Both versions, numbered as the fork's own: the version history and its diffs come along.
    assert list(report.versions.values_list("version", "content")) == [(1, "报告\n\n第一版。"), (2, "报告\n\n第二版。")]
    assert report.current_version == 2


def test_the_fork_goes_its_own_way(two_branches, other_user, scripted_model):
    conversation, heat, _solar = two_branches
    fork = conversation_fork(user=other_user, conversation=conversation, message=heat)

    scripted_model.add(Text("On it."))
    _turn(fork, content="And for a flat?")

    # The fork's turn saw the branch's history and plan.
    sent = scripted_model.requests[-1]["messages"]
    assert {"role": "assistant", "content": "Done."} in sent
    assert PLAN_HEAT in sent[0]["content"]
    assert Message.objects.filter(conversation=conversation).count() == 2
    # Deleting the original keeps the fork whole.
    conversation.delete()
    fork.refresh_from_db()
    assert fork.forked_from is None and fork.forked_at is None
    assert Message.objects.filter(conversation=fork).count() == 2
    assert _texts(fork)["task_plan"] == PLAN_HEAT


def test_an_upload_is_copied_with_its_file(user, other_user, media_root):
    conversation, (message,) = message_chain(1)
    Message.objects.filter(pk=message.pk).update(response="Read it.")
    message.refresh_from_db()
    branch = branch_shown(conversation=conversation)
    artifact_services.artifact_upload(branch=branch, filename="数据.csv", data=b"a,b\n1,2\n")

    fork = conversation_fork(user=other_user, conversation=conversation, message=message)

    copy = Artifact.objects.get(session__conversation=fork)
    original = Artifact.objects.get(session__conversation=conversation)
    assert copy.file.name != original.file.name
    original.file.delete()
    with copy.file.open("rb") as data:
        assert data.read() == b"a,b\n1,2\n"


def test_tools_the_owner_always_allowed_are_not_carried_over(user, other_user):
    conversation, (message,) = message_chain(1)
    Message.objects.filter(pk=message.pk).update(response="Done.", metadata={ALLOWED_TOOLS: ["web_fetch"]})
    message.refresh_from_db()

    fork = conversation_fork(user=other_user, conversation=conversation, message=message)

    assert ALLOWED_TOOLS not in fork.active_branch.metadata


def test_a_message_without_an_answer_or_of_another_conversation_is_refused(other_user):
    conversation, (message,) = message_chain(1)
    with pytest.raises(ValidationError, match="no answer yet"):
        conversation_fork(user=other_user, conversation=conversation, message=message)
    elsewhere = MessageFactory(response="An answer.")
    with pytest.raises(ValidationError, match="another conversation"):
        conversation_fork(user=other_user, conversation=conversation, message=elsewhere)
    assert not Conversation.objects.filter(owner=other_user).exists()


def test_a_forty_turn_thread_forks_whole(other_user):
    conversation, messages = message_chain(45)
    Message.objects.filter(conversation=conversation).update(response="回答：" + "热泵。" * 2000)

    fork = conversation_fork(user=other_user, conversation=conversation, message=messages[41])

    copied = list(Message.objects.filter(conversation=fork).order_by("created_at", "id"))
    assert [m.content for m in copied] == [f"m{i}" for i in range(42)]
    assert all(m.response.startswith("回答：") and len(m.response) == 3 + 6000 for m in copied)
    # One chain, root to leaf.
    assert copied[0].parent is None
    assert all(child.parent_id == parent.pk for parent, child in itertools.pairwise(copied))
    assert fork.active_branch == copied[-1]
