"""The project's settings, with what tests need on top."""

import os

# Tests run with DEBUG off, as production does, so they need a key of their own
# (strong enough to pass the production check; it protects nothing).
os.environ.setdefault("SECRET_KEY", "tests-only-not-a-secret-" + "0123456789abcdefghijklmnopqrstuvwxyz")

from artifactflow.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

if USING_SQLITE:  # noqa: F405
    # A file, as in production: an in-memory database shared between threads
    # locks whole tables and ignores the busy timeout.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-{os.getpid()}.sqlite3")}  # noqa: F405
else:
    # Threads of the channel layer and consumers open their own connections;
    # persistent ones would keep the test database from being dropped.
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
