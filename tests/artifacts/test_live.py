"""The live view across processes: a worker process changes an artifact and
the web process (this one) shows the change before it is flushed."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse

from agents.models import Run
from artifacts.manager import ArtifactManager
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
# The rendered plan item "- [x] search": a ticked checkbox before its text.
SEARCH_TICKED = re.compile(r'<input [^>]*checked="checked"[^>]*> search')
WORKER = """
import sys
import django
django.setup()
from artifacts.manager import ArtifactManager
from artifacts.models import ArtifactSession

manager = ArtifactManager(session=ArtifactSession.objects.get(pk=sys.argv[1]), run_id=int(sys.argv[2]))
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


def test_the_web_process_shows_what_a_worker_process_has_not_flushed(client, user):
    conversation = ConversationFactory(owner=user)
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    seed = ArtifactManager(session=conversation.artifact_session)
    seed.create(artifact_id="task_plan", content="- [ ] search\n- [ ] write\n")
    seed.flush_all()
    client.force_login(user)
    url = reverse("artifact-detail", args=[conversation.pk, "task_plan"])
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": _database_url()}

    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(conversation.pk), str(run.pk)],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
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
