import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.models import Run
from artifacts.models import Artifact
from conversations.models import Conversation
from tests.factories import ConversationFactory, MessageFactory, UserFactory
from tests.model_server import Status, Text

ROOT = Path(__file__).resolve().parents[2]

# Transactional: the command prints events as they commit.
pytestmark = pytest.mark.django_db(transaction=True)


def _ask(*args, **options):
    out, err = StringIO(), StringIO()
    call_command("ask", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_ask_prints_the_streamed_answer_and_stores_the_turn(user, scripted_model):
    scripted_model.add(Text("WAL lets readers and a writer work at once.", chunk_size=3))

    out, err = _ask("What is WAL?", user=user.username)

    assert out.strip() == "WAL lets readers and a writer work at once."
    conversation = Conversation.objects.get(owner=user)
    message = conversation.active_branch
    assert message.content == "What is WAL?"
    assert message.response == "WAL lets readers and a writer work at once."
    assert message.runs.get().status == Run.Status.COMPLETED
    assert f"conversation {conversation.pk}, message {message.pk}" in err


def test_ask_continues_or_branches_a_conversation(user, scripted_model):
    conversation = ConversationFactory(owner=user)
    root = MessageFactory(conversation=conversation, response="root answer")
    MessageFactory(conversation=conversation, parent=root, response="child answer")
    scripted_model.add(Text("Branched."))

    _ask("Again, differently", user=user.username, conversation=str(conversation.pk), parent=root.pk)

    conversation.refresh_from_db()
    assert conversation.active_branch.parent == root
    sent = scripted_model.requests[0]["messages"]
    assert [m["content"] for m in sent[1:]] == [root.content, "root answer", "Again, differently"]


def test_ask_fails_with_the_reason_when_the_model_fails(user, scripted_model):
    scripted_model.add(Status(500), Status(500), Status(500))
    with pytest.raises(CommandError, match="answered 500"):
        _ask("Anyone?", user=user.username)


def test_ask_refuses_another_users_conversation(user, other_user, scripted_model):
    theirs = ConversationFactory(owner=other_user)
    with pytest.raises(CommandError, match="has no conversation"):
        _ask("Mine now?", user=user.username, conversation=str(theirs.pk))
    assert scripted_model.requests == []


def test_ask_needs_a_user_when_there_are_several(user, other_user):
    with pytest.raises(CommandError, match="--user"):
        _ask("Who am I?")


def test_without_user_ask_takes_the_only_user_or_the_demo_login_and_says_which(user, scripted_model):
    scripted_model.add(Text("One."), Text("Two."))
    _, err = _ask("Whose question?")
    assert f"Asking as {user.username}, the only user" in err
    assert Conversation.objects.get().owner == user

    demo = UserFactory(username="demo")
    _, err = _ask("And now?")
    assert "Asking as demo, the demo login" in err
    assert Conversation.objects.filter(owner=demo).count() == 1


def test_ask_with_no_user_at_all_says_how_to_make_one(db):
    with pytest.raises(CommandError, match="createsuperuser"):
        _ask("Anyone there?")


def test_auto_approve_runs_the_demo_research_and_lists_the_artifacts(user, demo_model):
    out, err = _ask("How does SQLite WAL mode work?", user=user.username, auto_approve=True)

    assert "offline demo model" in out
    assert "artifact task_plan (version 4)" in out and "artifact research_report (version 1)" in out
    assert "denied" not in err
    assert "SQLite WAL mode" in Artifact.objects.get(artifact_id="research_report").content


def test_without_a_terminal_a_permission_request_is_denied_and_said(user, demo_model):
    _, err = _ask("How does SQLite WAL mode work?", user=user.username, stdin=StringIO("y\n"))

    assert "crawl_agent wants to call web_fetch(url='library://" in err
    assert "denied, there is no terminal to ask on" in err
    assert "Could not read it" in Artifact.objects.get(artifact_id="research_report").content


def test_on_a_terminal_the_user_is_asked(user, demo_model):
    controller, terminal_fd = os.openpty()
    os.write(controller, b"maybe\ny\ny\ny\n")
    with open(terminal_fd, encoding="utf-8") as terminal:
        _, err = _ask("How does SQLite WAL mode work?", user=user.username, stdin=terminal)
    os.close(controller)

    assert err.count("Allow? [y]es / [n]o / [a]lways in this branch:") >= 2
    report = Artifact.objects.get(artifact_id="research_report").content
    assert "Could not read it" not in report and "checkpoint" in report


@pytest.mark.processes
def test_ask_works_from_a_bare_shell_on_the_embedded_default(tmp_path):
    # Only the data directory is named (to keep the repository's own apart):
    # no SECRET_KEY, no DEBUG, no model; the demo model answers.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "ARTIFACTFLOW_DATA_DIR": str(tmp_path)}

    def manage(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    assert manage("migrate", "--noinput", "--verbosity", "0").returncode == 0
    created = manage(
        "shell", "-c", "from django.contrib.auth import get_user_model; get_user_model().objects.create_user('solo')"
    )
    assert created.returncode == 0, created.stderr
    result = manage("ask", "How does SQLite WAL mode work?")
    assert result.returncode == 0, result.stderr
    assert "Asking as solo, the only user" in result.stderr
    assert "demo model" in result.stdout.lower()
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
