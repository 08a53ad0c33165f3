import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.management.commands.worker import STOP_SECONDS
from tests import waits
from tests.processes import ROOT, Cluster

# The worker's cluster runs on the test database.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def _stat(pid: int) -> list[str]:
    # /proc/<pid>/stat: "pid (comm) state ppid pgrp session ..."; comm may hold spaces.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _session_of(pid: int) -> int:
    return int(_stat(pid)[3])


def _alive(pid: int) -> bool:
    # A zombie is gone but for its exit status, which a container's init may never collect.
    try:
        return _stat(pid)[0] != "Z"
    except FileNotFoundError:
        return False


def _processes_in_session(session: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if _session_of(int(entry.name)) == session:
                    found.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    return found


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_stopping_the_worker_as_honcho_does_stops_its_whole_cluster_in_time(tmp_path):
    env = Cluster(model_url="http://127.0.0.1:9/v1", model="unused", log=tmp_path / "worker.log").env
    with open(tmp_path / "worker.log", "w") as log:
        # Like honcho: a group of its own, then SIGTERM to the whole group.
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "worker"],
            cwd=ROOT,
            env={**env, "ARTIFACTFLOW_WORKERS": "2"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + waits.seconds(60)
    cluster = []
    # The main process, its sentinel, pusher and monitor, and two workers.
    while len(cluster) < 6:
        assert worker.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
        time.sleep(0.2)
        children = _children(worker.pid)
        cluster = _processes_in_session(children[0]) if children else []

    stopped_at = time.monotonic()
    os.killpg(worker.pid, signal.SIGTERM)
    returncode = worker.wait(timeout=waits.seconds(10))
    took = time.monotonic() - stopped_at

    assert returncode == 0, (tmp_path / "worker.log").read_text()
    # Within honcho's 5 s on a quiet machine; on a busy one every process's
    # signal, wait and exit take longer alike, so the whole bound is scaled.
    assert took < waits.seconds(STOP_SECONDS + 1)
    assert [pid for pid in cluster if _alive(pid)] == []
