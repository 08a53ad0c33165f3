"""Faults with real processes, timed: a scripted two-step turn (create the
artifact `notes`, then stream an answer of ~3 s) run by a real django-q2
cluster (`manage.py qcluster`) on the benchmark's database, and broken on
purpose the way tests/agents/test_faults.py and test_lease.py break it.

Per fault: the recovery time, the turn's total time against a healthy turn of
the same run (the baseline), model calls made against those needed (a repeat
is money spent twice), versions of `notes` (1 saved once, 0 lost, 2
duplicated), whether the answer stored is the scripted one, and worker
deaths/attempts. The kill faults run with a stale limit of STALE seconds, so a
recovery through the stale rule alone would show as minutes.

Runs on its own (`python benchmarks/faults.py`) or from benchmarks/run.py;
SQLite by default, Postgres and Redis when DATABASE_URL and REDIS_URL are set.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import logging
import os
import signal
import sqlite3
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django_q.conf import Conf
from django_q.status import Stat

from agents.models import Run
from agents.services.recovery import runs_sweep
from artifacts.models import ArtifactVersion
from conversations import lifecycle
from tests.model_server import ScriptedModelServer, Text
from tests.processes import Cluster, TcpProxy, database_url

STALE = 600  # the kill faults' stale limit: far beyond every recovery measured here
SWEEP_INTERVAL = 60  # the sweep's schedule (agents.apps)
SILENT_STALE = 1  # the silent-model fault's stale limit; the model thinks 4x as long
ANSWER = "## Findings\n\nWAL lets readers run beside one writer. " * 12
AGAIN = "## Findings, streamed again\n\nWAL lets readers run beside a writer. " * 10
NEEDED = 2  # model calls of a turn that nothing breaks
DONE = (Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED)
LOGS = Path(settings.DATA_DIR) / "faults-logs"


def call(name, **params):
    # A tool call written in the text, as tests/agents/test_engine.call writes it.
    body = "".join(f"<{key}>{value}</{key}>" for key, value in params.items())
    return f"<tool_call>\n  <name>{name}</name>\n  <params>{body}</params>\n</tool_call>"


def _slow(text, wait=0.0):
    return Text(text, chunk_size=4, delay=0.02, wait=wait)


class Turn:
    """One fault: its model server, its clusters and its run, all cleaned up on exit."""

    def __init__(self, name, *replies, env=None, database=None):
        self.name, self.env, self.database = name, env or {}, database
        self.model = ScriptedModelServer().start()
        self.model.add(Text(call("create_artifact", id="notes", content="saved once")), *replies)
        self.clusters = []
        self.run = self.conversation = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for cluster in self.clusters:
            cluster.stop()
        self.model.stop()
        if self.run is not None:
            # A run left running would be resumed by the next fault's cluster, against its model.
            Run.objects.filter(pk=self.run.pk).exclude(status__in=DONE).update(
                status=Run.Status.FAILED, error="benchmark: did not recover"
            )

    def cluster(self, *, ready=True):
        env = {
            "DJANGO_SETTINGS_MODULE": "artifactflow.settings",
            "SECRET_KEY": settings.SECRET_KEY,  # django-q2 signs task payloads with it
            "ARTIFACTFLOW_DATA_DIR": str(settings.DATA_DIR),  # the file cache and its cluster stats
            "ARTIFACTFLOW_HEARTBEAT_STALE": str(STALE),
            **self.env,
        }
        log = LOGS / f"{self.name.split()[0]}-{len(self.clusters)}.log"
        cluster = Cluster(model_url=self.model.url, model=self.model.model, log=log, env=env, database=self.database)
        self.clusters.append(cluster.start())
        if ready:  # its sentinel reports it running, so the turn below does not time its start-up
            pid = cluster.process.pid
            self.until(lambda: any(s.pid == pid and s.status in (Conf.IDLE, Conf.WORKING) for s in Stat.get_all()), 60)
        return cluster

    def ask(self):
        user = get_user_model().objects.get_or_create(username="bench-faults")[0]
        self.started = time.monotonic()
        self.conversation = lifecycle.conversation_start(user=user, content="Research WAL")  # enqueued on commit
        self.run = self.conversation.active_branch.runs.get()

    def status(self):
        return Run.objects.values_list("status", flat=True).get(pk=self.run.pk)

    def until(self, condition, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                tail = "\n".join(f"--- {c.log.name}\n{c.log_tail(25)}" for c in self.clusters)
                raise TimeoutError(f"{self.name}: not within {timeout:.0f} s; cluster log tail:\n{tail}")
            time.sleep(0.02)

    def sent(self, share):
        """`share` of the step-2 answer has been streamed by the model."""
        text = "".join(piece for _, piece in list(self.model.sent))
        start = text.find(ANSWER[:40])
        return start >= 0 and len(text) - start >= share * len(ANSWER)

    def finish(self, *, answer, recovery_from=None, timeout=60.0, **extra):
        resumed = None

        def ended():  # notes when a worker claims the run again (a second attempt)
            nonlocal resumed
            status, attempts = Run.objects.values_list("status", "attempts").get(pk=self.run.pk)
            if resumed is None and attempts > 1:
                resumed = time.monotonic()
            return status in DONE

        self.until(ended, timeout)
        done = time.monotonic()
        run = Run.objects.select_related("message").get(pk=self.run.pk)
        versions = ArtifactVersion.objects.filter(
            artifact__session__conversation=self.conversation, artifact__artifact_id="notes"
        ).count()
        return {
            "name": self.name,
            "status": run.status,
            "recovery": None if recovery_from is None else done - recovery_from,
            "resumed": None if recovery_from is None or resumed is None else resumed - recovery_from,
            "total": done - self.started,
            "calls": len(self.model.requests),
            "versions": versions,
            "answer": run.message.response == answer.strip(),
            "deaths": f"{run.worker_deaths}/{run.attempts}",
            **extra,
        }


def healthy():
    with Turn("healthy turn (baseline)", _slow(ANSWER)) as turn:
        turn.cluster()
        turn.ask()
        return turn.finish(answer=ANSWER)


def cluster_killed():
    with Turn("cluster SIGKILLed mid-answer", _slow(ANSWER), _slow(AGAIN)) as turn:
        first = turn.cluster()
        turn.ask()
        turn.until(lambda: turn.sent(0.5))
        first.kill()
        killed = time.monotonic()
        turn.cluster(ready=False)  # its start-up is part of the recovery
        return turn.finish(answer=AGAIN, recovery_from=killed, before=True)


def worker_killed():
    with Turn("worker SIGKILLed mid-answer", _slow(ANSWER), _slow(AGAIN)) as turn:
        turn.cluster()
        turn.ask()
        turn.until(lambda: turn.sent(0.5))
        worker = Run.objects.values_list("worker", flat=True).get(pk=turn.run.pk)
        os.kill(int(worker.rpartition(":")[2]), signal.SIGKILL)
        return turn.finish(answer=AGAIN, recovery_from=time.monotonic(), before=True)


def database_gone():
    if connection.vendor == "sqlite":
        # The worker gives up on a lock after 0.5 s, so a 4 s lock is an error it must ride out.
        with Turn(
            "SQLite locked 4 s near the end", _slow(ANSWER), env={"ARTIFACTFLOW_SQLITE_BUSY_TIMEOUT": "0.5"}
        ) as turn:
            turn.cluster()
            turn.ask()
            turn.until(lambda: turn.sent(0.8))
            blocker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
            blocker.execute("BEGIN EXCLUSIVE")
            time.sleep(4)
            blocker.execute("COMMIT")
            blocker.close()
            return turn.finish(answer=ANSWER, recovery_from=time.monotonic())
    db = connection.settings_dict
    proxy = TcpProxy(target=(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)))
    try:
        with Turn("Postgres cut 3 s near the end", _slow(ANSWER), database=database_url(port=proxy.port)) as turn:
            turn.cluster()
            turn.ask()
            turn.until(lambda: turn.sent(0.8))
            proxy.cut()
            time.sleep(3)
            proxy.restore()
            return turn.finish(answer=ANSWER, recovery_from=time.monotonic())
    finally:
        proxy.close()


def model_silent():
    name = f"model silent {4 * SILENT_STALE} s (stale limit {SILENT_STALE} s)"
    env = {"ARTIFACTFLOW_HEARTBEAT_STALE": str(SILENT_STALE)}
    with Turn(name, _slow(ANSWER, wait=4 * SILENT_STALE), env=env) as turn:
        turn.cluster()
        stale, settings.RUN_HEARTBEAT_STALE = settings.RUN_HEARTBEAT_STALE, SILENT_STALE
        recovered = 0

        def sweeping():  # the sweep, over and over while the turn runs
            nonlocal recovered
            recovered += runs_sweep()["recovered"]
            return turn.status() in DONE

        try:
            turn.ask()
            turn.until(sweeping, 60)
        finally:
            settings.RUN_HEARTBEAT_STALE = stale
        return turn.finish(answer=ANSWER, note=f"recovered by the sweep: {recovered} (0 = worker kept)")


def _row(r, baseline):
    recovery = "-" if r["recovery"] is None else f"{r['recovery']:.1f} s"
    resumed = "-" if r["resumed"] is None else f"{r['resumed']:.1f} s"
    calls = f"{r['calls']}/{NEEDED}" + (f" (+{r['calls'] - NEEDED})" if r["calls"] != NEEDED else "")
    answer = "same" if r["answer"] else "DIFFERENT"
    status = "" if r["status"] == Run.Status.COMPLETED else f"  {r['status'].upper()}"
    return (
        f"  {r['name']:<34}{resumed:>8}{recovery:>9}{r['total']:>8.1f} s{r['total'] / baseline:>7.2f}x  {calls:<10}"
        f"{r['versions']:^7}{answer:^10}{r['deaths']:^8}{status}"
    ).rstrip()


def main():
    LOGS.mkdir(parents=True, exist_ok=True)
    # django-q2 logs as "django-q"; the settings quiet "django_q", so each enqueue would print here.
    logging.getLogger("django-q").setLevel(logging.WARNING)
    backend = "SQLite (Unix-socket channel layer, file cache)" if connection.vendor == "sqlite" else "Postgres + Redis"
    print(f"faults, real qcluster processes on {backend}: a turn that creates `notes`, then streams ~3 s")
    print(f"kill faults run with a stale limit of {STALE} s; cluster logs in {LOGS}")
    results, failures = [], []
    for fault in (healthy, cluster_killed, worker_killed, database_gone, model_silent):
        try:
            results.append(fault())
        except TimeoutError as error:
            failures.append(str(error))
    if not results or not results[0]["name"].startswith("healthy"):
        print("\n".join(["the healthy turn did not complete, so nothing can be compared:", *failures]))
        return
    baseline = results[0]["total"]
    head = f"{'fault':<34}{'resumed':>8}{'recovery':>9}{'turn':>10}{'ratio':>8}  {'calls':<10}{'notes':^7}{'answer':^10}deaths"
    print(f"  {head}")
    for r in results:
        print(_row(r, baseline))
    print("  resumed: from the fault to a worker's claim of the run again; recovery: from the kill, or from the")
    print("  database's return, to the turn completed; turn: enqueued to completed; ratio: turn / healthy turn")
    print("  calls: made/needed; notes: versions of `notes`; answer: the stored answer is the scripted one;")
    print("  deaths: worker_deaths/attempts")
    for r in results:
        if r.get("before") and r["resumed"] is not None:
            # The stale rule resumes the run only once its heartbeat is STALE old and a sweep runs.
            redo = r["recovery"] - r["resumed"]
            limit = settings.RUN_HEARTBEAT_STALE
            print(
                f"  {r['name']}: resumed after {r['resumed']:.1f} s, completed {r['recovery']:.1f} s after the kill;\n"
                f"    by the stale rule (stale limit + up to one sweep interval) resumed after {STALE}–"
                f"{STALE + SWEEP_INTERVAL} s, completed after {STALE + redo:.0f}–{STALE + SWEEP_INTERVAL + redo:.0f} s"
                f"\n    ({limit}–{limit + SWEEP_INTERVAL} s to resume at this deployment's limit of {limit} s)"
            )
        if r.get("note"):
            print(f"  {r['name']}: {r['note']}")
    for failure in failures:
        print(f"  DID NOT RECOVER — {failure}")


if __name__ == "__main__":
    main()
