import os
import signal
import subprocess
import sys
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

# honcho (`make run`) kills a process it signalled after 5 seconds.
STOP_SECONDS = 4.0


class Command(BaseCommand):
    help = (
        "Run the django-q2 cluster (qcluster) for a process manager that signals a whole process "
        "group, as honcho does on Ctrl-C. A turn still running a few seconds after the stop is "
        "cut off; the recovery sweep resumes it from its last checkpoint."
    )

    def handle(self, *args, **options):
        # In a session of its own: django-q2's sentinel dies at once on a
        # SIGTERM of its own and leaves its workers behind, so only the
        # cluster's main process may be told to stop, and only by us.
        cluster = subprocess.Popen(
            [sys.executable, "-m", "django", "qcluster"], cwd=settings.BASE_DIR, start_new_session=True
        )
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        while cluster.poll() is None and not stop.wait(0.5):
            pass
        if cluster.poll() is None:
            cluster.terminate()
            try:
                cluster.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.stderr.write(
                    "The worker was still in a turn; it was stopped there, and the turn resumes "
                    "from its last checkpoint once a worker's sweep finds it."
                )
        # Whatever of the cluster is left, nothing outlives this command.
        try:
            os.killpg(cluster.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        cluster.wait()
        if not stop.is_set():
            # The cluster ended by itself: the process manager should know.
            raise SystemExit(cluster.returncode or 1)
