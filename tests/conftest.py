import os
import shutil
import subprocess

import pytest
from channels.layers import channel_layers
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.utils import translation

from agents.event_schema import EventSchemaError, event_validate
from agents.models import RunEvent
from artifactflow import extraction, realtime
from tests import waits
from tests import web_pages as web_pages_module
from tests.embeddings_server import MODEL as EMBEDDINGS_MODEL
from tests.embeddings_server import EmbeddingsServer
from tests.factories import UserFactory
from tests.model_server import ScriptedModelServer
from tests.processes import REDIS_SERVER, DisposableRedis

# The session's browser (one Chromium per test process) and what sharing it takes.
pytest_plugins = ["tests.browser"]


@pytest.fixture
def model_server():
    server = ScriptedModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def scripted_model(model_server, settings):
    """The one model every engine test talks to: the real SDK over HTTP to a
    scripted server. Add replies with `scripted_model.add(Text(...))`."""
    settings.ARTIFACTFLOW_LLM = {
        "api_key": "sk-test",
        "base_url": model_server.url,
        "model": model_server.model,
        "timeout": waits.seconds(10),
        "max_retries": 2,
    }
    return model_server


# Two lead models a person may choose between, both served by the scripted
# model (a model without base_url is the environment's service): as seed 003
# has it, the lead thinks by default and the subagents are fast.
LEAD_MODELS = """
[models.fast]
label = "快速 Fast"
model = "fast-model"

[models.deep]
label = "深度思考 Deep"
model = "deep-model"
thinking = true

[agents]
lead_agent = "deep"
search_agent = "fast"
crawl_agent = "fast"

[lead]
choices = ["deep", "fast"]
"""


@pytest.fixture
def lead_models(scripted_model, settings, tmp_path):
    """The models file of LEAD_MODELS, in force: the composer offers its two lead models."""
    path = tmp_path / "models.toml"
    path.write_text(LEAD_MODELS)
    settings.MODELS_FILE = str(path)
    return path


@pytest.fixture
def small_window(settings, scripted_model):
    """The scripted model with a window of 10,000 tokens, compacting from 70% of it."""
    # About 7,000 tokens before compaction: the prompts fit, 30,000 characters of notes do not.
    settings.ARTIFACTFLOW_LLM = {**settings.ARTIFACTFLOW_LLM, "context_window": 10_000}
    settings.COMPACTION_THRESHOLD = 0.7
    # The service refuses, as a real one does, a request longer than the window.
    scripted_model.context_window = 10_000
    return scripted_model


@pytest.fixture
def demo_model(settings):
    """The offline demo model, with the sample library to search and read."""
    settings.ARTIFACTFLOW_LLM = {**settings.ARTIFACTFLOW_LLM, "api_key": ""}
    settings.DEMO_WORD_DELAY = 0
    settings.SEARCH_PROVIDER = settings.SEARXNG_URL = settings.TAVILY_API_KEY = ""
    call_command("library_samples", verbosity=0)


@pytest.fixture(scope="session", autouse=True)
def metrics_fresh():
    """This test process's counts (tests.settings' PROMETHEUS_MULTIPROC_DIR) start
    from none: an earlier run's are in files that outlive it."""
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, which it drops at the end of the session.
    On Postgres the drop fails while anything is still connected, and the
    database stays on the server, one more per worker at every run: threads of
    this process that used the database keep the connections they took from
    the pool, which closing the pool cannot reach. They are cut off first."""
    yield
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def pytest_report_header(config):
    return f"waits scaled by {waits.SCALE} (TEST_TIMEOUT_SCALE; tests/waits.py)"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "events_by_hand: writes run events itself, some not of their declared shape, to see what the readers make "
        "of them; run_events_valid leaves the test alone",
    )


# Fixtures that start a process, by where they are defined: the e2e portal and
# Chromium (new_page and page ask for it), a Redis of the test's own, the OpenID provider.
PROCESS_FIXTURES = {
    "tests.e2e.conftest.portal",
    "tests.browser.browser",
    "tests.conftest.disposable_redis",
    "tests.accounts.test_oidc.provider",
    "tests.e2e.test_sso.provider",
}


def _fixtures(item) -> set[str]:
    """Where each fixture the test asks for, directly or not, is defined: "module.name"."""
    definitions = item._fixtureinfo.name2fixturedefs if hasattr(item, "_fixtureinfo") else {}
    return {
        f"{defined[-1].func.__module__}.{defined[-1].func.__name__}"
        for name in getattr(item, "fixturenames", ())
        if (defined := definitions.get(name))
    }


def pytest_collection_modifyitems(config, items):
    """Marks `processes` every test that starts a process or a browser, for
    `make check` to leave out: those asking for a fixture above, the e2e and
    fault tests, and those marked by hand (processes_marked keeps that right)."""
    for item in items:
        if PROCESS_FIXTURES & _fixtures(item) or item.get_closest_marker("e2e") or item.get_closest_marker("faults"):
            item.add_marker(pytest.mark.processes)


@pytest.fixture(autouse=True)
def processes_marked(request, monkeypatch):
    """A test not marked `processes` starts none: one that does fails here,
    asking for the marker, so `make check` never slows by a new test's processes.
    Allowed, as the code under test's own and quick: the document readers'
    sandboxed child (artifactflow.extraction) and `uname -p`, which
    platform.processor() runs once in a process for a library that asks."""
    if request.node.get_closest_marker("processes"):
        yield
        return
    started = []
    execute = subprocess.Popen._execute_child

    def recorded(popen, args, *rest, **options):
        command = [str(arg) for arg in args] if isinstance(args, list | tuple) else [str(args)]
        if extraction.__name__ not in command[:5] and command != ["uname", "-p"]:
            started.append(" ".join(command)[:200])
        return execute(popen, args, *rest, **options)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", recorded)
    yield
    if started:
        pytest.fail(
            "Started a process but is not marked processes (make check leaves those out): "
            "add @pytest.mark.processes.\n" + "\n".join(started),
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def run_events_valid(request):
    """Every event a database test wrote, by a worker in another process
    too, has its declared shape (agents.event_schema). The database is set
    up before this fixture so that it is still there when this one ends."""
    uses_db = request.node.get_closest_marker("django_db") is not None or "db" in request.fixturenames
    if not uses_db or request.node.get_closest_marker("events_by_hand") is not None:
        yield
        return
    request.getfixturevalue("db")
    yield
    invalid = []
    for event in RunEvent.objects.order_by("run_id", "seq"):
        try:
            event_validate(type=event.type, data=event.data)
        except EventSchemaError as error:
            invalid.append(f"run {event.run_id} #{event.seq}: {error}")
    if invalid:
        pytest.fail("Events not of their declared shape:\n" + "\n".join(invalid), pytrace=False)


@pytest.fixture(autouse=True)
def default_language():
    """LocaleMiddleware leaves a request's language active in the thread: the
    next test, from whichever file runs next in this process, starts in English."""
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    # A layer holds connections and polling tasks bound to the event loop that
    # first used it; each test runs in a loop of its own.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def disposable_redis(settings, tmp_path):
    """A Redis of the test's own (tests.processes) behind the cache and the channel
    layer, whichever the suite runs on, for the test to kill and start again.
    Skipped on a developer machine without redis-server; CI never skips."""
    if REDIS_SERVER is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing; CI runs on a machine with Redis installed")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    redis = DisposableRedis(directory=tmp_path).start()
    # Changing these settings drops the cache connections and channel layers
    # made from the old ones (Django's and channels' setting_changed receivers).
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis.url,
            "KEY_PREFIX": "artifactflow",
        }
    }
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": redis.url, "socket_timeout": 15, "socket_connect_timeout": 5}]},
        }
    }
    # The publisher made a layer of its own when it started.
    realtime.publisher_reset()
    yield redis
    realtime.publisher_reset()
    redis.kill()


@pytest.fixture
def embeddings(settings, tmp_path):
    """A scripted embeddings server the library's vectors are made by (tests.embeddings_server), in a file of the test's own."""
    server = EmbeddingsServer().start()
    settings.EMBEDDINGS = {
        **settings.EMBEDDINGS,
        "model": EMBEDDINGS_MODEL,
        "base_url": server.url,
        "api_key": "sk-test",
    }
    settings.LIBRARY_VECTORS_PATH = tmp_path / "library-vectors.sqlite3"
    cache.delete("library-vectors-queued")
    yield server
    server.stop()


@pytest.fixture
def web_pages(settings):
    """A site of web pages on this machine that web_fetch may read (tests.web_pages)."""
    settings.FETCH_ALLOWED_HOSTS = [web_pages_module.ALLOWED_HOST]
    site = web_pages_module.PageSite().start()
    yield site
    site.stop()


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    """Uploaded files go to the test's own directory, not the data directory."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


@pytest.fixture
def signed_in(client, user):
    """The test client, signed in as `user`."""
    client.force_login(user)
    return client


@pytest.fixture
def staff_client(client):
    """The test client signed in as an administrator."""
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client
