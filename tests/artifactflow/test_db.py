import multiprocessing
import os
import secrets
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError, connection
from django.db.backends.postgresql.base import DatabaseWrapper

from tests.e2e.conftest import VENV_BIN, Portal, _free_port, _manage, _postgres_database, _start, _stop, _wait_for_http

pytestmark = [
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the connection pool is Postgres's"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.processes,
]


def _backend_pid(database) -> int:
    with database.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _child_backend_pid(queue, settings_dict) -> None:
    child = DatabaseWrapper(settings_dict, alias="forked")
    queue.put(_backend_pid(child))
    child.close()


def test_a_forked_process_opens_connections_of_its_own_not_its_parents_pooled_ones():
    # A pool of this test's own: what it holds idle is what this test gave back,
    # whatever the test process's other threads borrow from the default one.
    settings_dict = {**connection.settings_dict, "OPTIONS": {"pool": {"min_size": 1, "max_size": 2}}}
    parent = DatabaseWrapper(settings_dict, alias="forked")
    try:
        # As django-q2's sentinel does before it forks a worker: use the database, give the connection back.
        _backend_pid(parent)
        parent.close()
        pooled = {pooled.info.backend_pid for pooled in parent.pool._pool}
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_child_backend_pid, args=(queue, settings_dict))
        child.start()
        child_pid = queue.get(timeout=30)
        child.join(timeout=30)
        assert pooled and child_pid not in pooled
        # The parent's pooled connections still work: the child neither used nor closed them.
        assert _backend_pid(parent) in pooled
    finally:
        parent.close()
        parent.close_pool()


def test_an_exhausted_pool_fails_after_its_timeout_instead_of_hanging():
    settings_dict = {
        **connection.settings_dict,
        "OPTIONS": {"pool": {"min_size": 0, "max_size": 1, "timeout": 0.5}},
    }
    # Wrappers of one alias share its pool; each belongs to the thread that made it.
    waiter = DatabaseWrapper(settings_dict, alias="exhausted")
    held, release = threading.Event(), threading.Event()

    def hold():
        holder = DatabaseWrapper(settings_dict, alias="exhausted")
        holder.ensure_connection()
        held.set()
        release.wait(30)
        holder.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(30)
        started = time.monotonic()
        with pytest.raises(OperationalError, match=r"couldn.t get a connection after 0\.50 sec"):
            waiter.ensure_connection()
        assert time.monotonic() - started < 5
    finally:
        release.set()
        thread.join()
        waiter.close_pool()


def _pages_burst(*, urls: list[str], cookie: str) -> list[int]:
    """Loads every URL at once, as many people opening the portal together; returns the statuses."""
    barrier = threading.Barrier(len(urls))
    statuses = [0] * len(urls)

    def load(index: int, url: str) -> None:
        request = urllib.request.Request(url, headers={"Cookie": cookie})
        barrier.wait()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
                statuses[index] = response.status
        except urllib.error.HTTPError as error:
            statuses[index] = error.code

    threads = [threading.Thread(target=load, args=(i, url)) for i, url in enumerate(urls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


class _ConnectionsWatch:
    """Samples how many server connections a database has, from the server's side."""

    def __init__(self, *, admin_url: str, database: str):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(admin_url, database))

    def _sample(self, admin_url: str, database: str) -> None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            while not self._stop.wait(0.02):
                [(count,)] = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database])
                self.peak = max(self.peak, count)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def test_a_daphne_serving_bursts_of_page_loads_stays_within_its_pool(tmp_path):
    # A pool far smaller than the burst: the pages wait their turn for a connection, none fails.
    pool_max, burst = 8, 40
    database_url = os.environ["DATABASE_URL"]
    name = f"{connection.settings_dict['NAME']}_pool_{secrets.token_hex(4)}"
    _postgres_database(url=database_url, name=name, create=True)
    port = _free_port()
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": urlsplit(database_url)._replace(path=f"/{name}").geturl(),
        "REDIS_URL": settings.REDIS_URL,
        "ARTIFACTFLOW_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "artifactflow.settings",
        "ARTIFACTFLOW_DB_POOL_MAX_SIZE": str(pool_max),
        # Ample on a busy machine: this test is about the bound, not the wait.
        "ARTIFACTFLOW_DB_POOL_TIMEOUT": "60",
        "PYTHONUNBUFFERED": "1",
    }
    logs = {"setup": tmp_path / "setup.log", "daphne": tmp_path / "daphne.log"}
    base_url = f"http://127.0.0.1:{port}"
    portal = Portal(base_url=base_url, users=[], model_server=None, logs=logs, env=env)
    daphne = None
    try:
        _manage("migrate", "--noinput", "--verbosity", "0", env=env, log=logs["setup"])
        cookie, conversation = portal.shell(
            "from django.contrib.auth import get_user_model; from django.test import Client; "
            "from conversations import lifecycle; "
            "user = get_user_model().objects.create_user(username='burst', password='not-used-0123'); "
            "conversation = lifecycle.conversation_start(user=user, content='Question?', enqueue=False); "
            "client = Client(); client.force_login(user); "
            "print(client.cookies['sessionid'].value, conversation.pk)"
        ).split()
        daphne = _start(
            command=[str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "artifactflow.asgi:application"],
            env=env,
            log=logs["daphne"],
        )
        _wait_for_http(url=f"{base_url}/accounts/login/", processes=[daphne], portal=portal)
        urls = [f"{base_url}/", f"{base_url}/c/{conversation}/"] * (burst // 2)
        admin_url = urlsplit(database_url)._replace(path="/postgres").geturl()
        for _ in ("the first burst", "the next, on the connections the first gave back"):
            with _ConnectionsWatch(admin_url=admin_url, database=name) as watch:
                statuses = _pages_burst(urls=urls, cookie=f"sessionid={cookie}")
            assert statuses == [200] * burst, portal.log_tails()
            assert 0 < watch.peak <= pool_max
    finally:
        portal.close()
        if daphne is not None:
            _stop(process=daphne)
        _postgres_database(url=database_url, name=name, create=False)
