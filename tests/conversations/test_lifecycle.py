"""A conversation's lifecycle: started with its first question, asked in
(each question a queued turn, on the branch the person chose), deleted only
once no turn writes to it, and forked: another person continues a branch in a
conversation of their own, with the branch's questions, answers and artifacts
as they were, and the two go their own ways."""

import itertools

import pytest
from django.core.exceptions import ValidationError

from agents.models import Run
from agents.selectors import ALLOWED_TOOLS
from agents.services.execution import run_execute
from artifacts import selectors as artifact_selectors
from artifacts import services as artifact_services
from artifacts.branches import branch_shown
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from conversations import lifecycle
from conversations.models import Conversation, Message
from library.models import WebSnapshot
from library.services import snapshot_keep
from tests.agents.test_engine import call
from tests.artifacts import test_branches
from tests.artifacts.test_branches import PLAN_HEAT, _turn, _writes
from tests.factories import ConversationFactory, MessageFactory, message_chain
from tests.model_server import Text

pytestmark = pytest.mark.django_db


def _answered(conversation):
    """The conversation with its turns finished, so another may start."""
    Run.objects.filter(message__conversation=conversation).update(status=Run.Status.COMPLETED)
    return conversation


def test_start_creates_conversation_session_first_message_and_queued_run(user):
    conversation = lifecycle.conversation_start(user=user, content="  What is   SQLite WAL?  ")

    message = conversation.active_branch
    assert message.content == "What is   SQLite WAL?"
    assert message.parent is None
    assert conversation.title == "What is SQLite WAL?"
    assert ArtifactSession.objects.filter(pk=conversation.pk).exists()
    assert [run.status for run in message.runs.all()] == [Run.Status.QUEUED]


def test_long_first_message_gives_a_short_title(user):
    conversation = lifecycle.conversation_start(user=user, content="word " * 100)
    assert len(conversation.title) <= lifecycle.TITLE_LENGTH + 1
    assert conversation.title.endswith("…")


def test_without_a_parent_the_active_branch_continues(user):
    conversation = lifecycle.conversation_start(user=user, content="first")
    first = conversation.active_branch

    second = lifecycle.message_post(conversation=_answered(conversation), content="second")
    third = lifecycle.message_post(conversation=_answered(conversation), content="third")

    assert second.parent == first
    assert third.parent == second
    conversation.refresh_from_db()
    assert conversation.active_branch == third


def test_naming_a_parent_starts_a_branch_there_and_makes_it_active(user):
    conversation = lifecycle.conversation_start(user=user, content="root")
    root = conversation.active_branch
    lifecycle.message_post(conversation=_answered(conversation), content="child A")

    branch = lifecycle.message_post(conversation=_answered(conversation), content="child B", parent=root)

    assert branch.parent == root
    assert sorted(root.children.values_list("content", flat=True)) == ["child A", "child B"]
    conversation.refresh_from_db()
    assert conversation.active_branch == branch


def test_no_parent_starts_a_new_root(user):
    conversation = lifecycle.conversation_start(user=user, content="root one")

    new_root = lifecycle.message_post(conversation=_answered(conversation), content="root two", parent=None)

    assert new_root.parent is None
    assert conversation.messages.filter(parent=None).count() == 2
    conversation.refresh_from_db()
    assert conversation.active_branch == new_root


@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING_PERMISSION])
def test_one_turn_at_a_time_a_message_while_a_turn_is_active_is_refused_on_any_branch(user, status):
    conversation = lifecycle.conversation_start(user=user, content="first")
    root = conversation.active_branch
    root.runs.update(status=status)

    for parent in (lifecycle.ACTIVE_BRANCH, root, None):
        with pytest.raises(ValidationError, match="A turn is still running in this conversation"):
            lifecycle.message_post(conversation=conversation, content="too soon", parent=parent)

    assert conversation.messages.count() == 1 and Run.objects.count() == 1
    conversation.refresh_from_db()
    assert conversation.active_branch == root
    # Another conversation of the same user is not held up.
    assert (
        lifecycle.conversation_start(user=user, content="elsewhere").active_branch.runs.get().status
        == Run.Status.QUEUED
    )


@pytest.mark.django_db(transaction=True)
def test_two_messages_sent_at_once_start_one_turn(user):
    """Two tabs sending together: the conversation row serialises them, on SQLite and Postgres."""
    import threading

    from django.db import connection

    conversation = _answered(lifecycle.conversation_start(user=user, content="first"))
    barrier = threading.Barrier(2)
    outcomes = []

    def send(text):
        barrier.wait()
        try:
            lifecycle.message_post(conversation=Conversation.objects.get(pk=conversation.pk), content=text)
            outcomes.append("sent")
        except ValidationError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(text,)) for text in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["refused", "sent"]
    assert Run.objects.filter(status=Run.Status.QUEUED).count() == 1


def test_a_parent_from_another_conversation_is_refused(user):
    conversation = lifecycle.conversation_start(user=user, content="mine")
    foreign = MessageFactory()

    with pytest.raises(ValidationError):
        lifecycle.message_post(conversation=conversation, content="x", parent=foreign)
    assert conversation.messages.count() == 1


@pytest.mark.parametrize("content", ["", "   \n ", "x" * (lifecycle.MAX_MESSAGE_LENGTH + 1)])
def test_empty_or_oversize_messages_are_refused_and_store_nothing(user, content):
    with pytest.raises(ValidationError):
        lifecycle.conversation_start(user=user, content=content)
    assert not Conversation.objects.exists()
    assert not ArtifactSession.objects.exists()


def test_the_title_is_kept_once_set():
    conversation = ConversationFactory(title="Named by the user")
    lifecycle.message_post(conversation=conversation, content="anything")
    conversation.refresh_from_db()
    assert conversation.title == "Named by the user"


@pytest.mark.django_db(transaction=True)
def test_the_turn_is_enqueued_only_after_commit(user):
    from django.db import transaction
    from django_q.models import OrmQ

    with transaction.atomic():
        conversation = lifecycle.conversation_start(user=user, content="queued?")
        assert OrmQ.objects.count() == 0
    run = conversation.active_branch.runs.get()
    [queued] = OrmQ.objects.all()
    assert queued.func() == "agents.tasks.run_turn"
    assert queued.task["args"] == (run.pk,)


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_post_enqueues_nothing(user):
    from django.db import transaction
    from django_q.models import OrmQ

    with pytest.raises(RuntimeError), transaction.atomic():
        lifecycle.conversation_start(user=user, content="never")
        raise RuntimeError
    assert OrmQ.objects.count() == 0


@pytest.mark.parametrize("status", [Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED])
def test_delete_once_the_turn_has_ended_takes_messages_runs_and_artifacts_along(user, status):
    conversation = lifecycle.conversation_start(user=user, content="Hello", enqueue=False)
    Run.objects.update(status=status)

    snapshot_keep(
        conversation_id=conversation.pk, url="https://a.example/", title="", content_type="text/plain", text="读"
    )

    lifecycle.conversation_delete(conversation=conversation)

    assert not Conversation.objects.exists()
    assert not Run.objects.exists() and not ArtifactSession.objects.exists()
    assert not WebSnapshot.objects.exists()


@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING_PERMISSION])
def test_delete_is_refused_while_a_turn_is_active_and_leaves_the_turn_alone(user, status):
    conversation = lifecycle.conversation_start(user=user, content="Hello", enqueue=False)
    Run.objects.update(status=status)

    with pytest.raises(ValidationError, match="Stop it"):
        lifecycle.conversation_delete(conversation=conversation)

    run = Run.objects.get()
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert ArtifactSession.objects.filter(pk=conversation.pk).exists()
    # Stopping is the user's decision, not a side effect of asking to delete.
    assert run.status == status and not run.cancel_requested


def test_the_lead_model_chosen_is_kept_for_the_conversation_and_its_turn(user, lead_models):
    conversation = lifecycle.conversation_start(user=user, content="用快速模型回答", lead_model="fast")
    assert conversation.lead_model == "fast" and conversation.active_branch.runs.get().lead_model == "fast"

    # A message that names no model (Edit, Ask again) keeps the conversation's.
    _answered(conversation)
    message = lifecycle.message_post(conversation=conversation, content="再问一次")
    conversation.refresh_from_db()
    assert conversation.lead_model == "fast" and message.runs.get().lead_model == "fast"

    # Blank is the configured default.
    _answered(conversation)
    message = lifecycle.message_post(conversation=conversation, content="默认模型", lead_model="")
    conversation.refresh_from_db()
    assert conversation.lead_model == "" and message.runs.get().lead_model == ""


@pytest.mark.parametrize("models_file", [True, False])
def test_a_model_outside_the_list_is_refused_and_nothing_is_stored(user, lead_models, settings, models_file):
    if not models_file:
        settings.MODELS_FILE = ""
    conversation = lifecycle.conversation_start(
        user=user, content="第一个问题", lead_model="fast" if models_file else None
    )
    _answered(conversation)

    for name in ("gpt-5-huge", "fast-model", "deep "):
        with pytest.raises(ValidationError, match="That model cannot be chosen here"):
            lifecycle.message_post(conversation=conversation, content="换个模型", lead_model=name)
    with pytest.raises(ValidationError):
        lifecycle.conversation_start(user=user, content="新的对话", lead_model="gpt-5-huge")

    conversation.refresh_from_db()
    assert conversation.lead_model == ("fast" if models_file else "")
    assert conversation.messages.count() == 1 and Conversation.objects.count() == 1


def test_a_choice_refused_with_its_message_is_not_kept(user, lead_models):
    """A turn still running refuses the message, and the model sent with it."""
    conversation = lifecycle.conversation_start(user=user, content="第一个问题")

    with pytest.raises(ValidationError, match="A turn is still running"):
        lifecycle.message_post(conversation=conversation, content="太快了", lead_model="fast")

    conversation.refresh_from_db()
    assert conversation.lead_model == ""


# --- forking ----------------------------------------------------------------------

two_branches = test_branches.two_branches


def _texts(conversation):
    branch = branch_shown(conversation=conversation)
    return {item.artifact_id: item.content for item in artifact_selectors.artifact_list(branch=branch)}


def test_a_fork_holds_the_branch_shown_with_its_artifacts_and_says_where_it_came_from(two_branches, other_user):
    conversation, heat, _solar = two_branches
    read = snapshot_keep(
        conversation_id=conversation.pk,
        url="https://heat.example/",
        title="热泵",
        content_type="text/html",
        text="热泵",
    )

    fork = lifecycle.conversation_fork(user=other_user, conversation=conversation, message=heat)

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
    # The copied answers' links open the pages as they were read, in the fork, whatever becomes of the original.
    (copy,) = WebSnapshot.objects.filter(conversation=fork)
    assert (copy.url, copy.text, copy.digest, copy.fetched_at) == (read.url, read.text, read.digest, read.fetched_at)
    assert WebSnapshot.objects.filter(conversation=conversation).get() == read


def test_a_fork_stops_at_the_chosen_message_and_its_artifacts_at_that_point(user, other_user, scripted_model):
    scripted_model.add(*_writes("- [ ] 第一步", "报告\n\n第一版。"))
    conversation = lifecycle.conversation_start(user=user, content="热泵和燃气哪个好？", enqueue=False)
    first = conversation.active_branch
    run_execute(run_id=first.runs.get().pk)
    scripted_model.add(
        Text(call("rewrite_artifact", id="report", content="报告\n\n第二版。")),
        Text("改好了。"),
    )
    second = _turn(conversation, content="再详细一点")
    scripted_model.add(Text("好的。"))
    _turn(conversation, content="谢谢")

    fork = lifecycle.conversation_fork(user=other_user, conversation=conversation, message=second)

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
    fork = lifecycle.conversation_fork(user=other_user, conversation=conversation, message=heat)

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

    fork = lifecycle.conversation_fork(user=other_user, conversation=conversation, message=message)

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

    fork = lifecycle.conversation_fork(user=other_user, conversation=conversation, message=message)

    assert ALLOWED_TOOLS not in fork.active_branch.metadata


def test_a_message_without_an_answer_or_of_another_conversation_is_refused(other_user):
    conversation, (message,) = message_chain(1)
    with pytest.raises(ValidationError, match="no answer yet"):
        lifecycle.conversation_fork(user=other_user, conversation=conversation, message=message)
    elsewhere = MessageFactory(response="An answer.")
    with pytest.raises(ValidationError, match="another conversation"):
        lifecycle.conversation_fork(user=other_user, conversation=conversation, message=elsewhere)
    assert not Conversation.objects.filter(owner=other_user).exists()


def test_a_forty_turn_thread_forks_whole(other_user):
    conversation, messages = message_chain(45)
    Message.objects.filter(conversation=conversation).update(response="回答：" + "热泵。" * 2000)

    fork = lifecycle.conversation_fork(user=other_user, conversation=conversation, message=messages[41])

    copied = list(Message.objects.filter(conversation=fork).order_by("created_at", "id"))
    assert [m.content for m in copied] == [f"m{i}" for i in range(42)]
    assert all(m.response.startswith("回答：") and len(m.response) == 3 + 6000 for m in copied)
    # One chain, root to leaf.
    assert copied[0].parent is None
    assert all(child.parent_id == parent.pk for parent, child in itertools.pairwise(copied))
    assert fork.active_branch == copied[-1]
