"""The library's move out of agents (library's migration 0001, agents' 0019)
and its passages (library's 0002), run by `manage.py migrate` on a database
made before them, as an upgrade runs: the documents, their search, cut into
passages, and the permissions staff held on them are all there after it, on
SQLite and on Postgres."""

import json
import os
import secrets
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import REPO, _postgres_database

pytestmark = pytest.mark.processes

# Run in a process of its own, on a database of its own: the test database is migrated already.
BEFORE = """
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.db import connection
# The worker's queue first: migrate schedules the sweeps there (agents.apps).
call_command("migrate", "django_q", verbosity=0)
# And the audit trail's, which records the group made below as today's code does.
call_command("migrate", "audit", verbosity=0)
call_command("migrate", "agents", "0018_http_secret_origin", verbosity=0)
connection.cursor().execute(
    "INSERT INTO agents_librarydocument (title, content, original_file, content_type, created_at, updated_at) "
    "VALUES ('空气源热泵', '寒冷地区的空气源热泵仍然高效。', '', 'text/markdown', '2026-01-01', '2026-01-01')"
)
editors = Group.objects.create(name="library editors")
editors.permissions.add(Permission.objects.get(content_type__app_label="agents", codename="change_librarydocument"))
"""
AFTER = """
import json
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from library.models import LibraryDocument
from library.selectors import library_search
call_command("migrate", verbosity=0)
editors = Group.objects.get(name="library editors")
print(json.dumps({
    "titles": list(LibraryDocument.objects.values_list("title", flat=True)),
    "found": [(hit.title, hit.url, hit.snippet) for hit in library_search(query="热泵", limit=5)],
    "held": sorted(f"{p.content_type.app_label}.{p.codename}" for p in editors.permissions.all()),
    "agents_documents": Permission.objects.filter(content_type__app_label="agents", codename__endswith="librarydocument").count(),
}))
"""


@pytest.fixture
def database_url(tmp_path):
    url = os.environ.get("DATABASE_URL", "")
    if urlsplit(url).scheme not in ("postgres", "postgresql"):
        yield f"sqlite:///{tmp_path / 'upgrade.sqlite3'}"
        return
    name = f"{urlsplit(url).path.lstrip('/')}_upgrade_{secrets.token_hex(4)}"
    _postgres_database(url=url, name=name, create=True)
    try:
        yield urlsplit(url)._replace(path=f"/{name}").geturl()
    finally:
        _postgres_database(url=url, name=name, create=False)


def _shell(code: str, *, env: dict) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_an_upgrade_keeps_the_library_its_search_and_who_may_edit_it(tmp_path, database_url):
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "ARTIFACTFLOW_DATA_DIR": str(tmp_path / "data"),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_SETTINGS_MODULE": "artifactflow.settings",
    }

    _shell(BEFORE, env=env)
    after = json.loads(_shell(AFTER, env=env).splitlines()[-1])

    assert after["titles"] == ["空气源热泵"]
    [(title, url, snippet)] = after["found"]
    assert (title, url) == ("空气源热泵", "library://1#1")
    assert snippet == "寒冷地区的空气源**热泵**仍然高效。"
    assert after["held"] == ["library.change_librarydocument"]
    assert after["agents_documents"] == 0
