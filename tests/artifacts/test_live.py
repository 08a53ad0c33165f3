"""The live view across processes: a worker process changes an artifact and
the web process (this one) shows the change before it is flushed."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse

from agents.models import Run
from artifacts import live
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
# The rendered plan item "- [x] search": a ticked checkbox before its text.
SEARCH_TICKED = re.compile(r'<input [^>]*checked="checked"[^>]*> search')
WORKER = """
import sys
import django
django.setup()
from agents.models import Run
from artifacts.branches import branch_at
from artifacts.manager import ArtifactManager

run = Run.objects.select_related("message__conversation__artifact_session").get(pk=sys.argv[2])
branch = branch_at(session=run.message.conversation.artifact_session, message_id=run.message_id)
manager = ArtifactManager(branch=branch, run_id=run.pk)
manager.update(artifact_id="task_plan", old_str="- [ ] search", new_str="- [x] search")
print("updated", flush=True)
sys.stdin.readline()
manager.flush_all()
print("flushed", flush=True)
"""


def _database_url():
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.mark.processes
def test_the_web_process_shows_what_a_worker_process_has_not_flushed(client, user):
    conversation = ConversationFactory(owner=user)
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    seed = ArtifactManager(branch=branch_shown(conversation=conversation))
    seed.create(artifact_id="task_plan", content="- [ ] search\n- [ ] write\n")
    seed.flush_all()
    client.force_login(user)
    url = reverse("artifact-detail", args=[conversation.pk, "task_plan"])
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": _database_url()}

    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(conversation.pk), str(run.pk)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout.readline().strip() == "updated"
        during = client.get(url, HTTP_HX_REQUEST="true").content.decode()
        worker.stdin.write("\n")
        worker.stdin.flush()
        assert worker.stdout.readline().strip() == "flushed"
    finally:
        worker.stdin.close()
        worker.wait(timeout=30)

    assert SEARCH_TICKED.search(during) and "unsaved work of the running turn" in during
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    after = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert SEARCH_TICKED.search(after) and "unsaved work" not in after
    assert list(conversation.artifact_session.artifacts.get().versions.values_list("version", flat=True)) == [1, 2]


def _running(user):
    conversation = ConversationFactory(owner=user)
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    return conversation, run


def test_an_artifact_tool_works_while_redis_is_down_and_its_flush_saves_the_version(
    disposable_redis, user, caplog, monkeypatch
):
    # No outage left over from an earlier test of this process.
    monkeypatch.setattr(live._cache, "down", False)
    conversation, run = _running(user)
    # As a worker's: every change also wakes the pages, through the dead channel layer.
    manager = ArtifactManager(
        branch=branch_shown(conversation=conversation),
        run_id=run.pk,
        on_change=lambda: live.live_announce(session_id=conversation.pk),
    )
    disposable_redis.kill()

    with caplog.at_level(logging.WARNING, logger="artifacts.live"):
        manager.create(artifact_id="task_plan", content="- [ ] search\n")
        manager.update(artifact_id="task_plan", old_str="- [ ] search", new_str="- [x] search")
        report = manager.flush_all()

    assert report.flushed == ["task_plan"] and not report.failed
    saved = Artifact.objects.get(session=conversation.artifact_session, artifact_id="task_plan")
    assert list(saved.versions.values_list("version", "content")) == [(2, "- [x] search\n")]
    # Three failed cache calls, one outage, one warning.
    assert len([r for r in caplog.records if r.name == "artifacts.live"]) == 1


def test_once_redis_is_back_the_worker_publishes_its_working_copies_again(disposable_redis, client, user):
    conversation, run = _running(user)
    seed = ArtifactManager(branch=branch_shown(conversation=conversation))
    seed.create(artifact_id="task_plan", content="- [ ] search\n- [ ] write\n")
    seed.flush_all()
    wake_ups = []
    manager = ArtifactManager(
        branch=branch_shown(conversation=conversation), run_id=run.pk, on_change=lambda: wake_ups.append(True)
    )
    client.force_login(user)
    url = reverse("artifact-detail", args=[conversation.pk, "task_plan"])

    def shown():
        response = client.get(url, HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        return response.content.decode()

    disposable_redis.kill()
    manager.update(artifact_id="task_plan", old_str="- [ ] search", new_str="- [x] search")
    during = shown()
    disposable_redis.start()
    # Back, but empty: nothing of the turn's is in it yet.
    back = shown()
    manager.live_republish()
    after = shown()
    manager.live_republish()

    assert not SEARCH_TICKED.search(during) and "unsaved work" not in during
    assert not SEARCH_TICKED.search(back) and "unsaved work" not in back
    assert SEARCH_TICKED.search(after) and "unsaved work of the running turn" in after
    # The update woke the pages, and so did the one republishing that was needed.
    assert len(wake_ups) == 2
