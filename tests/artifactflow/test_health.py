"""The probes' answers (artifactflow.health): /healthz whatever else is
down, /readyz only while the database, the channel layer and a worker are
there, saying which is not."""

import copy
import logging

import pytest
from django.db import connection
from django.test import Client

from tests import waits
from tests.processes import Cluster, free_port

pytestmark = pytest.mark.django_db(transaction=True)


def _ready(client: Client) -> tuple[int, dict[str, str]]:
    response = client.get("/readyz")
    states = dict(line.split(": ", 1) for line in response.content.decode().splitlines())
    return response.status_code, states


@pytest.fixture
def worker(tmp_path):
    cluster = Cluster(model_url="http://127.0.0.1:9/v1", model="unused", log=tmp_path / "worker.log").start()
    yield cluster
    cluster.kill()


def test_healthz_answers_anyone_without_the_database(client, settings):
    with _database_gone():
        response = client.get("/healthz")

    assert (response.status_code, response.content) == (200, b"ok\n")
    assert client.post("/healthz").status_code == 405


def test_probes_are_answered_over_plain_http_where_pages_are_redirected_to_https(client, settings):
    """A probe asks daphne itself, not nginx, so without X-Forwarded-Proto."""
    settings.SECURE_SSL_REDIRECT = True

    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code in (200, 503)
    assert client.get("/accounts/login/").status_code == 301


@pytest.mark.processes
def test_readyz_is_ready_while_a_worker_sweeps_and_says_so_once_it_has_died(client, settings, worker):
    waits.until(lambda: _ready(client)[0] == 200, timeout=60)
    assert _ready(client)[1] == {"database": "ok", "channel layer": "ok", "worker": "ok"}

    worker.kill()
    settings.READY_WORKER_SECONDS = waits.seconds(2)

    waits.until(lambda: _ready(client)[0] == 503, timeout=10)
    assert _ready(client)[1]["worker"].startswith("none has swept for ")


def test_readyz_fails_while_the_database_is_gone_and_names_no_address(client, caplog):
    with _database_gone(), caplog.at_level(logging.WARNING):
        status, states = _ready(client)

    assert status == 503
    assert states["database"] == "unreachable"
    # Said once, as a warning with its cause; a probe's every 503 is no error.
    assert [(r.name, r.levelname) for r in caplog.records if "database" in r.getMessage()] == [
        ("artifactflow.health", "WARNING")
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert _ready(client)[1]["database"] == "ok"


def test_readyz_fails_while_redis_is_gone(client, disposable_redis):
    assert _ready(client)[1]["channel layer"] == "ok"

    disposable_redis.kill()
    status, states = _ready(client)

    assert status == 503
    assert states["channel layer"] == "unreachable"
    assert states["worker"] == "unknown: the cache is unreachable"


class _database_gone:
    """The connection's next attempt goes where no database is: below a file
    on SQLite (no directory can be made there); on Postgres, a port nothing
    listens on, through a new pool that waits a second for it."""

    def __enter__(self):
        self.saved = copy.deepcopy(connection.settings_dict)
        connection.close()
        if connection.vendor == "sqlite":
            connection.settings_dict["NAME"] = "/etc/hostname/db.sqlite3"
            return
        connection.close_pool()
        connection.settings_dict["PORT"] = free_port()
        options = connection.settings_dict["OPTIONS"]
        options["pool"] = {**options["pool"], "min_size": 0, "timeout": 1}

    def __exit__(self, *exc):
        connection.close()
        if connection.vendor != "sqlite":
            connection.close_pool()
        connection.settings_dict.clear()
        connection.settings_dict.update(self.saved)
