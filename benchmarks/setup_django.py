"""Sets Django up on a throw-away SQLite file (the embedded default) unless
DATABASE_URL/REDIS_URL are set, then migrates it."""

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def setup():
    os.environ.setdefault("ARTIFACTFLOW_DATA_DIR", tempfile.mkdtemp(prefix="artifactflow-bench-"))
    # Strong enough for the production check; it protects nothing.
    os.environ.setdefault("SECRET_KEY", "benchmarks-only-not-a-secret-0123456789abcdefghijklmnopqrstuvwxyz")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "artifactflow.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
