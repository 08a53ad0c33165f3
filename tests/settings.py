"""The project's settings, with what tests need on top."""

import os
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

# Tests run with DEBUG off, as production does, so they need a key of their own
# (strong enough to pass the production check; it protects nothing).
os.environ.setdefault("SECRET_KEY", "tests-only-not-a-secret-" + "0123456789abcdefghijklmnopqrstuvwxyz")

from artifactflow.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# A title proposed after a first turn is one more model call, which the scripted
# model's replies would have to foresee: the tests that want it turn it on.
MODEL_TITLES = env.bool("ARTIFACTFLOW_MODEL_TITLES", default=False)  # noqa: F405
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# The tests that make writes fail for good would otherwise wait out production's
# 30 s of retries; the fault tests' workers, which ride out a real outage, set
# ARTIFACTFLOW_DB_RETRY_SECONDS themselves.
DB_RETRY_SECONDS = env.float("ARTIFACTFLOW_DB_RETRY_SECONDS", default=0.5)  # noqa: F405

# pytest-xdist runs the suite in several processes, "gw0", "gw1", …; this is set in
# each of them and passed on to the processes they start (tests.processes), which
# then share their test process's database, cache and channel layer, never another's.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

# Each test process counts into a directory of its own, which the processes it starts share.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(DATA_DIR / f"metrics-test-{XDIST_WORKER or 'serial'}")  # noqa: F405

if USING_SQLITE:  # noqa: F405
    # A file, as in production: an in-memory database shared between threads
    # locks whole tables and ignores the busy timeout.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-{os.getpid()}.sqlite3")}  # noqa: F405
    # Tests clear the cache: each test process has a directory of its own.
    CACHES["default"]["LOCATION"] = str(DATA_DIR / f"cache-test-{XDIST_WORKER or 'serial'}")  # noqa: F405
    # Its wake-ups reach the processes its tests start, never another test process's.
    CHANNEL_LAYERS["default"]["CONFIG"]["directory"] = str(DATA_DIR / f"live-test-{XDIST_WORKER or 'serial'}")  # noqa: F405

if REDIS_URL and XDIST_WORKER:  # noqa: F405
    # Redis database number REDIS_URL's + N for worker gwN (REDIS_URL's alone when
    # serial), so the workers' channel groups and cache, which tests clear, stay
    # apart: REDIS_URL=redis://…/0 with two workers uses databases 0 and 1. Redis has
    # 16, so the base plus the number of workers must stay within 16.
    base = urlsplit(REDIS_URL)  # noqa: F405
    number = int(base.path.strip("/") or 0) + int(XDIST_WORKER.removeprefix("gw"))
    if number > 15:
        raise ImproperlyConfigured(
            f"REDIS_URL's database plus the xdist worker number is {number}: Redis has databases 0 to 15 only; "
            "name a lower database in REDIS_URL or run fewer workers (make test TEST_WORKERS=…)."
        )
    REDIS_URL = base._replace(path=f"/{number}").geturl()
    CACHES["default"]["LOCATION"] = REDIS_URL  # noqa: F405
    CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"] = REDIS_URL  # noqa: F405

if REDIS_URL:
    # The portals the browser tests start share this Redis database, with
    # production's settings and a database of their own whose ids are not these
    # tests': a wake-up for that portal's user 107 must not reach a page of this
    # database's user 107, nor its worker's heartbeat stand in for a worker here.
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = "test"  # noqa: F405
    CACHES["default"]["KEY_PREFIX"] = "artifactflow-test"  # noqa: F405
