import pytest
from django.core.exceptions import ValidationError

from agents.models import Run
from agents.services import asking
from artifacts.models import ArtifactSession
from conversations.models import Conversation
from tests.factories import ConversationFactory, MessageFactory

pytestmark = pytest.mark.django_db


def _answered(conversation):
    """The conversation with its turns finished, so another may start."""
    Run.objects.filter(message__conversation=conversation).update(status=Run.Status.COMPLETED)
    return conversation


def test_start_creates_conversation_session_first_message_and_queued_run(user):
    conversation = asking.conversation_start(user=user, content="  What is   SQLite WAL?  ")

    message = conversation.active_branch
    assert message.content == "What is   SQLite WAL?"
    assert message.parent is None
    assert conversation.title == "What is SQLite WAL?"
    assert ArtifactSession.objects.filter(pk=conversation.pk).exists()
    assert [run.status for run in message.runs.all()] == [Run.Status.QUEUED]


def test_long_first_message_gives_a_short_title(user):
    conversation = asking.conversation_start(user=user, content="word " * 100)
    assert len(conversation.title) <= asking.TITLE_LENGTH + 1
    assert conversation.title.endswith("…")


def test_without_a_parent_the_active_branch_continues(user):
    conversation = asking.conversation_start(user=user, content="first")
    first = conversation.active_branch

    second = asking.message_post(conversation=_answered(conversation), content="second")
    third = asking.message_post(conversation=_answered(conversation), content="third")

    assert second.parent == first
    assert third.parent == second
    conversation.refresh_from_db()
    assert conversation.active_branch == third


def test_naming_a_parent_starts_a_branch_there_and_makes_it_active(user):
    conversation = asking.conversation_start(user=user, content="root")
    root = conversation.active_branch
    asking.message_post(conversation=_answered(conversation), content="child A")

    branch = asking.message_post(conversation=_answered(conversation), content="child B", parent=root)

    assert branch.parent == root
    assert sorted(root.children.values_list("content", flat=True)) == ["child A", "child B"]
    conversation.refresh_from_db()
    assert conversation.active_branch == branch


def test_no_parent_starts_a_new_root(user):
    conversation = asking.conversation_start(user=user, content="root one")

    new_root = asking.message_post(conversation=_answered(conversation), content="root two", parent=None)

    assert new_root.parent is None
    assert conversation.messages.filter(parent=None).count() == 2
    conversation.refresh_from_db()
    assert conversation.active_branch == new_root


@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING_PERMISSION])
def test_one_turn_at_a_time_a_message_while_a_turn_is_active_is_refused_on_any_branch(user, status):
    conversation = asking.conversation_start(user=user, content="first")
    root = conversation.active_branch
    root.runs.update(status=status)

    for parent in (asking.ACTIVE_BRANCH, root, None):
        with pytest.raises(ValidationError, match="A turn is still running in this conversation"):
            asking.message_post(conversation=conversation, content="too soon", parent=parent)

    assert conversation.messages.count() == 1 and Run.objects.count() == 1
    conversation.refresh_from_db()
    assert conversation.active_branch == root
    # Another conversation of the same user is not held up.
    assert (
        asking.conversation_start(user=user, content="elsewhere").active_branch.runs.get().status == Run.Status.QUEUED
    )


@pytest.mark.django_db(transaction=True)
def test_two_messages_sent_at_once_start_one_turn(user):
    """Two tabs sending together: the conversation row serialises them, on SQLite and Postgres."""
    import threading

    from django.db import connection

    conversation = _answered(asking.conversation_start(user=user, content="first"))
    barrier = threading.Barrier(2)
    outcomes = []

    def send(text):
        barrier.wait()
        try:
            asking.message_post(conversation=Conversation.objects.get(pk=conversation.pk), content=text)
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
    conversation = asking.conversation_start(user=user, content="mine")
    foreign = MessageFactory()

    with pytest.raises(ValidationError):
        asking.message_post(conversation=conversation, content="x", parent=foreign)
    assert conversation.messages.count() == 1


@pytest.mark.parametrize("content", ["", "   \n ", "x" * (asking.MAX_MESSAGE_LENGTH + 1)])
def test_empty_or_oversize_messages_are_refused_and_store_nothing(user, content):
    with pytest.raises(ValidationError):
        asking.conversation_start(user=user, content=content)
    assert not Conversation.objects.exists()
    assert not ArtifactSession.objects.exists()


def test_the_title_is_kept_once_set():
    conversation = ConversationFactory(title="Named by the user")
    asking.message_post(conversation=conversation, content="anything")
    conversation.refresh_from_db()
    assert conversation.title == "Named by the user"


@pytest.mark.django_db(transaction=True)
def test_the_turn_is_enqueued_only_after_commit(user):
    from django.db import transaction
    from django_q.models import OrmQ

    with transaction.atomic():
        conversation = asking.conversation_start(user=user, content="queued?")
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
        asking.conversation_start(user=user, content="never")
        raise RuntimeError
    assert OrmQ.objects.count() == 0


@pytest.mark.parametrize("status", [Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED])
def test_delete_once_the_turn_has_ended_takes_messages_runs_and_artifacts_along(user, status):
    conversation = asking.conversation_start(user=user, content="Hello", enqueue=False)
    Run.objects.update(status=status)

    asking.conversation_delete(conversation=conversation)

    assert not Conversation.objects.exists()
    assert not Run.objects.exists() and not ArtifactSession.objects.exists()


@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING_PERMISSION])
def test_delete_is_refused_while_a_turn_is_active_and_leaves_the_turn_alone(user, status):
    conversation = asking.conversation_start(user=user, content="Hello", enqueue=False)
    Run.objects.update(status=status)

    with pytest.raises(ValidationError, match="Stop it"):
        asking.conversation_delete(conversation=conversation)

    run = Run.objects.get()
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert ArtifactSession.objects.filter(pk=conversation.pk).exists()
    # Stopping is the user's decision, not a side effect of asking to delete.
    assert run.status == status and not run.cancel_requested


def test_the_lead_model_chosen_is_kept_for_the_conversation_and_its_turn(user, lead_models):
    conversation = asking.conversation_start(user=user, content="用快速模型回答", lead_model="fast")
    assert conversation.lead_model == "fast" and conversation.active_branch.runs.get().lead_model == "fast"

    # A message that names no model (Edit, Ask again) keeps the conversation's.
    _answered(conversation)
    message = asking.message_post(conversation=conversation, content="再问一次")
    conversation.refresh_from_db()
    assert conversation.lead_model == "fast" and message.runs.get().lead_model == "fast"

    # Blank is the configured default.
    _answered(conversation)
    message = asking.message_post(conversation=conversation, content="默认模型", lead_model="")
    conversation.refresh_from_db()
    assert conversation.lead_model == "" and message.runs.get().lead_model == ""


@pytest.mark.parametrize("models_file", [True, False])
def test_a_model_outside_the_list_is_refused_and_nothing_is_stored(user, lead_models, settings, models_file):
    if not models_file:
        settings.MODELS_FILE = ""
    conversation = asking.conversation_start(
        user=user, content="第一个问题", lead_model="fast" if models_file else None
    )
    _answered(conversation)

    for name in ("gpt-5-huge", "fast-model", "deep "):
        with pytest.raises(ValidationError, match="That model cannot be chosen here"):
            asking.message_post(conversation=conversation, content="换个模型", lead_model=name)
    with pytest.raises(ValidationError):
        asking.conversation_start(user=user, content="新的对话", lead_model="gpt-5-huge")

    conversation.refresh_from_db()
    assert conversation.lead_model == ("fast" if models_file else "")
    assert conversation.messages.count() == 1 and Conversation.objects.count() == 1


def test_a_choice_refused_with_its_message_is_not_kept(user, lead_models):
    """A turn still running refuses the message, and the model sent with it."""
    conversation = asking.conversation_start(user=user, content="第一个问题")

    with pytest.raises(ValidationError, match="A turn is still running"):
        asking.message_post(conversation=conversation, content="太快了", lead_model="fast")

    conversation.refresh_from_db()
    assert conversation.lead_model == ""
