"""Backups (artifactflow.backups): written mid-turn and restored elsewhere
with everything in it, on the database the suite runs on; refused, changing
nothing, when damaged, of a newer schema or aimed at a place that is not
empty; and kept to the newest few on a schedule."""

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django_q.models import Schedule

from agents.models import Run
from agents.services.execution import run_execute
from artifactflow import backups
from artifactflow.apps import BACKUP_SCHEDULE
from conversations import lifecycle
from library.services import library_document_create
from tests import waits
from tests.factories import ArtifactFactory, ConversationShareFactory
from tests.model_server import Text
from tests.processes import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

STRONG_KEY = "a-50-character-secret-key-for-the-restored-portal-0123456789"
# What the restored portal is asked, printed as JSON by a fresh interpreter.
READ_BACK = """
import json
from django.contrib.auth import get_user_model
from agents.models import Run
from artifacts.models import ArtifactVersion
from conversations.models import Conversation, ConversationShare
from library.models import LibraryDocument
document = LibraryDocument.objects.get()
print(json.dumps({
    "users": sorted(get_user_model().objects.values_list("username", flat=True)),
    "titles": sorted(Conversation.objects.values_list("title", flat=True)),
    "runs": sorted(Run.objects.values_list("status", flat=True)),
    "versions": sorted(ArtifactVersion.objects.values_list("content", flat=True)),
    "shares": ConversationShare.objects.count(),
    "upload": document.original_file.read().decode(),
}))
"""


@pytest.fixture
def elsewhere(tmp_path):
    """A second portal's environment: a new data directory and, on Postgres, a new empty database."""
    data = tmp_path / "restored"
    environment = {name: value for name, value in os.environ.items() if name not in {"DJANGO_SETTINGS_MODULE"}}
    environment.update(DJANGO_SETTINGS_MODULE="artifactflow.settings", ARTIFACTFLOW_DATA_DIR=str(data))
    created = None
    if connection.vendor == "sqlite":
        environment.pop("DATABASE_URL", None)
        environment.pop("REDIS_URL", None)
    else:
        created = f"restored_{os.getpid()}_{tmp_path.name[-12:]}".replace("-", "_")
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{created}"')
        db = connection.settings_dict
        environment.update(
            DATABASE_URL=f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{created}",
            SECRET_KEY=STRONG_KEY,
        )
    yield environment
    if created:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{created}" WITH (FORCE)')


def _manage(environment, *arguments) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=waits.seconds(120),
    )


def test_a_backup_written_mid_turn_restores_elsewhere_with_everything_in_it(
    user, other_user, scripted_model, tmp_path, elsewhere
):
    scripted_model.add(Text("The first answer, complete. 第一个回答。"))
    first = lifecycle.conversation_start(user=user, content="Heat pumps in winter? 冬天的热泵?", enqueue=False)
    run_execute(run_id=first.active_branch.runs.get().pk)
    ArtifactFactory(session=first.artifact_session, content="Version two 第二版", versions=["Version one 第一版"])
    ConversationShareFactory(conversation=first, user=other_user)
    library_document_create(
        user=user, title="Notes", uploaded_file=SimpleUploadedFile("notes.txt", "上传的笔记".encode())
    )
    scripted_model.add(Text("Streaming, then held. The rest.", hold="The rest."))
    second = lifecycle.conversation_start(user=user, content="A turn the backup cuts through", enqueue=False)
    turn = threading.Thread(target=run_execute, kwargs={"run_id": second.active_branch.runs.get().pk})
    turn.start()
    try:
        # Held once it has streamed its first part.
        waits.until(lambda: "Streaming" in "".join(piece for _, piece in scripted_model.sent), timeout=30)
        call_command("backup", str(tmp_path / "portal.tar"))
    finally:
        scripted_model.release()
        turn.join()

    restored = _manage(elsewhere, "restore", str(tmp_path / "portal.tar"))
    assert restored.returncode == 0, restored.stderr
    migrated = _manage(elsewhere, "migrate", "--no-input")
    assert migrated.returncode == 0, migrated.stderr
    read = _manage(elsewhere, "shell", "--no-imports", "-c", READ_BACK)

    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout.strip().splitlines()[-1]) == {
        "users": sorted([user.username, other_user.username]),
        "titles": sorted(["Heat pumps in winter? 冬天的热泵?", "A turn the backup cuts through"]),
        # The cut turn was running: the restored portal's sweep resumes it.
        "runs": sorted([Run.Status.COMPLETED, Run.Status.RUNNING]),
        "versions": ["Version one 第一版", "Version two 第二版"],
        "shares": 1,
        "upload": "上传的笔记",
    }
    assert stat.S_IMODE((tmp_path / "portal.tar").stat().st_mode) == 0o600


def _backup(tmp_path) -> Path:
    path = tmp_path / "portal.tar"
    backups.backup_write(destination=path)
    return path


def _rewritten(path: Path, *, manifest=None, member=None) -> Path:
    """The backup with its manifest changed by `manifest` or a member's bytes by `member`."""
    out = path.with_name("changed.tar")
    with tarfile.open(path) as source, tarfile.open(out, "w") as target:
        for info in source:
            data = source.extractfile(info).read()
            if info.name == backups.MANIFEST and manifest:
                data = json.dumps(manifest(json.loads(data))).encode()
            elif member and info.name != backups.MANIFEST:
                data, member = member(data), None
            info.size = len(data)
            target.addfile(info, io.BytesIO(data))
    return out


@pytest.mark.parametrize(
    "damage, said",
    [
        (
            lambda path: _rewritten(path, member=lambda data: data[:-1] + bytes([data[-1] ^ 1])),
            "does not match its checksum",
        ),
        (lambda path: path.write_bytes(path.read_bytes()[:5000]) and path, "is not a whole backup"),
        (lambda path: (path.write_text("not a backup"), path)[1], "is not a whole backup"),
    ],
    ids=["a-flipped-bit", "cut-short", "not-a-backup"],
)
def test_a_damaged_backup_is_refused_and_nothing_is_put_in_place(tmp_path, settings, damage, said):
    damaged = damage(_backup(tmp_path))
    settings.MEDIA_ROOT = tmp_path / "empty-media"

    with pytest.raises(backups.BackupRefused, match=said):
        backups.backup_restore(source=damaged)
    assert not settings.MEDIA_ROOT.exists()


def test_a_backup_whose_manifest_is_incomplete_is_refused(tmp_path):
    incomplete = _rewritten(
        _backup(tmp_path), manifest=lambda m: {**m, "members": {"database.sqlite3": {"size": "big"}}}
    )

    with pytest.raises(backups.BackupRefused, match="its manifest is incomplete"):
        backups.backup_restore(source=incomplete)


def test_a_backup_of_a_newer_schema_is_refused(tmp_path):
    newer = _rewritten(
        _backup(tmp_path),
        manifest=lambda m: {**m, "migrations": [*m["migrations"], ["agents", "9999_from_the_future"]]},
    )

    with pytest.raises(
        backups.BackupRefused, match=r"newer version of the portal: 1 of its migrations .*9999_from_the_future"
    ):
        backups.backup_restore(source=newer)


def test_a_restore_into_a_portal_that_has_data_is_refused(tmp_path, user):
    with pytest.raises(CommandError, match="A restore goes into an empty"):
        call_command("restore", str(_backup(tmp_path)))
    assert get_user_model().objects.filter(pk=user.pk).exists()


def test_a_backup_of_another_database_engine_is_refused(tmp_path):
    other = "postgresql" if connection.vendor == "sqlite" else "sqlite"
    moved = _rewritten(_backup(tmp_path), manifest=lambda m: {**m, "engine": other})

    with pytest.raises(backups.BackupRefused, match=f"This backup is of a {other} database"):
        backups.backup_restore(source=moved)


def test_migrate_schedules_backups_while_a_directory_is_set_and_stops_once_it_is_not(settings, tmp_path):
    settings.BACKUP_DIR, settings.BACKUP_HOURS = str(tmp_path / "backups"), 6
    call_command("migrate", verbosity=0)
    assert Schedule.objects.filter(name=BACKUP_SCHEDULE).values_list("func", "minutes").get() == (
        "artifactflow.backups.backup_scheduled",
        360,
    )

    settings.BACKUP_DIR = ""
    call_command("migrate", verbosity=0)
    assert not Schedule.objects.filter(name=BACKUP_SCHEDULE).exists()


def test_the_schedule_keeps_the_newest_backups(tmp_path, settings):
    settings.BACKUP_DIR, settings.BACKUP_KEEP = str(tmp_path / "backups"), 2
    old = [tmp_path / "backups" / backups.SCHEDULED_NAME.format(stamp=f"2026010{day}T000000Z") for day in (1, 2)]
    for path in old:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"an older backup")

    newest = Path(backups.backup_scheduled())

    assert sorted((tmp_path / "backups").iterdir()) == [old[1], newest]
    with tarfile.open(newest) as tar:
        assert backups.MANIFEST in tar.getnames()
