"""Settings for ArtifactFlow, read from the environment.

The embedded default (no variables set) is one machine with SQLite and no other
server. Setting DATABASE_URL (Postgres) and REDIS_URL scales out to several web
and worker processes. Every value a deployment may change is an environment
variable; secrets never come from this file.
"""

import ipaddress
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from artifactflow.datadir import local_secret_key_read

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)

# Importing these settings makes no directory and writes no file: the
# embedded database makes its file, and the directories above it, when a
# process first opens it (artifactflow.sqlite3), and `migrate` makes the local
# secret key (artifactflow.datadir); whatever else writes under it (uploads,
# collectstatic, the file cache, demo_user) makes the directories it writes to.
DATA_DIR = Path(env.str("ARTIFACTFLOW_DATA_DIR", default=str(BASE_DIR / "data")))
# Each process counts into files here, which /metrics reads (artifactflow.metrics):
# a directory of this machine's own, never a shared mount. Named before any
# module imports prometheus_client, which reads it then.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(DATA_DIR / "metrics"))

# --- Database -----------------------------------------------------------------

DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'artifactflow.sqlite3'}")}
USING_SQLITE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
if USING_SQLITE:
    # Django's backend, giving each connection the function search indexes
    # with, and making the file readable by its owner alone.
    DATABASES["default"]["ENGINE"] = "artifactflow.sqlite3"


def _secret_key_weak(key: str) -> bool:
    # The bar Django's deployment check (security.W009) sets.
    return len(key) < 50 or len(set(key)) < 5 or key.startswith("django-insecure-")


SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not USING_SQLITE:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. A server database (DATABASE_URL) serves several processes, "
            "perhaps on several machines: give them all the same key in the environment."
        )
    # One machine with its SQLite file: a key kept beside it serves the web
    # process, the workers and manage.py alike, with nothing to export. Until
    # `migrate` has made it, it is empty, and the system checks say so
    # (artifactflow.checks).
    SECRET_KEY = local_secret_key_read(data_dir=DATA_DIR)
elif not DEBUG and _secret_key_weak(SECRET_KEY):
    raise ImproperlyConfigured(
        "SECRET_KEY is too weak for production: use at least 50 random characters, e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'."
    )

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# --- HTTPS ----------------------------------------------------------------------

# Served over HTTPS when every trusted origin is https://: TLS ends at a proxy
# (nginx) that sets X-Forwarded-Proto, so Django knows a request was secure and
# redirects plain HTTP instead of looping. Plain HTTP on a trusted network
# keeps working with http:// origins.
HTTPS = not DEBUG and bool(CSRF_TRUSTED_ORIGINS) and all(o.startswith("https://") for o in CSRF_TRUSTED_ORIGINS)
# Probes ask a web process itself over plain HTTP (docs/deploy.md), past nginx.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)

# --- Database connections -------------------------------------------------------

if USING_SQLITE:
    # The web process and the django-q2 workers write to the same file. WAL lets
    # readers run beside the writer; IMMEDIATE takes the write lock at BEGIN so
    # a transaction waits (busy timeout) instead of failing with "database is
    # locked" when it upgrades from read to write.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env.float("ARTIFACTFLOW_SQLITE_BUSY_TIMEOUT", default=20.0),
        # auto_vacuum takes effect on a new file (set before its first table)
        # or at a VACUUM; then retention hands freed pages back to the file
        # system in bounded steps (agents.services.retention.storage_reclaim).
        "init_command": (
            "PRAGMA auto_vacuum=INCREMENTAL;PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA foreign_keys=ON;"
        ),
    }
    # A thread keeps its connection: opening one (the file, its pragmas, the
    # schema parsed, Django's functions registered) costs 1.3-1.7 ms of CPU,
    # and the web process opened one for every read its websockets made. With
    # 20 people asking (benchmarks/load.py, two runs each way) a turn cost
    # 0.94 CPU-s rather than 1.00, and the first token's p95 was 2.0 s rather
    # than 2.5 s. A thread that ends (a request's) closes its own; there is no
    # server whose connections they would hold.
    DATABASES["default"]["CONN_MAX_AGE"] = None
else:
    # Each process keeps a pool of connections (Django's, on psycopg_pool) and
    # every thread borrows one for a request, a websocket's read or a write and
    # gives it back. Connections kept per thread (CONN_MAX_AGE) leaked under
    # ASGI, where each request runs in a thread of its own: one burst of page
    # loads left a daphne with 88 idle connections and Postgres refused the next.
    if "CONN_MAX_AGE" in os.environ:
        raise ImproperlyConfigured(
            "CONN_MAX_AGE is no longer read: each process keeps a connection pool instead; "
            "size it with ARTIFACTFLOW_DB_POOL_MIN_SIZE, ARTIFACTFLOW_DB_POOL_MAX_SIZE and ARTIFACTFLOW_DB_POOL_TIMEOUT."
        )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A connection is checked as it leaves the pool, so one the server dropped is replaced.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Added to whatever options DATABASE_URL's query string gave (sslmode, …).
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "name": "artifactflow",
        # Opened with the pool (at a process's first query) and kept; the rest
        # open on demand, and one a burst opened is closed each max_idle
        # seconds while the pool has more than it used (psycopg_pool's default:
        # ten minutes), so a quiet process gives back what a burst took.
        "min_size": env.int("ARTIFACTFLOW_DB_POOL_MIN_SIZE", default=1),
        "max_idle": env.float("ARTIFACTFLOW_DB_POOL_MAX_IDLE", default=600.0),
        # The most a process opens. A worker's turns borrow one for each write
        # and give it back while they wait on the model
        # (artifactflow.db.connection_release), so they share a few; the
        # default covers even all of ARTIFACTFLOW_TURNS_PER_WORKER writing at
        # once for a moment. A web process needs one per request in flight
        # plus its WEBSOCKET_THREADS.
        "max_size": env.int("ARTIFACTFLOW_DB_POOL_MAX_SIZE", default=20),
        # A thread waits this long for a connection, then fails with
        # psycopg_pool.PoolTimeout (an OperationalError, logged like any
        # other) rather than hanging while the pool stays exhausted.
        "timeout": env.float("ARTIFACTFLOW_DB_POOL_TIMEOUT", default=10.0),
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channel layer and cache ----------------------------------------------------

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 times a socket read out after 5 s by default, and
            # channels_redis blocks 5 s waiting for a message, so every idle
            # websocket died with "Timeout reading from …" (channels_redis#422).
            # A read may block up to 5 s here; a dead Redis still shows in 15.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5}]},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "artifactflow",
        }
    }
elif USING_SQLITE:
    # Carries wake-ups from a worker (or a request) to the web process over a
    # Unix socket in the data directory (live.layer): nothing is written for a
    # push and nothing polls. Messages are only wake-ups: the consumer reads the
    # event log, so a dropped one is healed by the next.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "live.layer.LocalSocketLayer",
            "CONFIG": {"directory": str(DATA_DIR / "live"), "capacity": 500},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(DATA_DIR / "cache"),
            # It keeps rendered answers and artifact pages (artifactflow.rendered):
            # a team's recent threads, not Django's 300 entries. Each write lists
            # the directory to cull it, about 10 ms at this size; reads do not.
            "OPTIONS": {"MAX_ENTRIES": 2000},
        }
    }
else:
    raise ImproperlyConfigured(
        "DATABASE_URL names a server database but REDIS_URL is not set: a "
        "multi-process deployment needs Redis for its channel layer and cache."
    )

# --- Applications ---------------------------------------------------------------

INSTALLED_APPS = [
    "daphne",
    # Prepares every process: its file descriptor limit, its pool across a fork.
    "artifactflow",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "template_partials",
    "django_q",
    "axes",
    "csp",
    "conversations",
    "artifacts",
    "library",
    "agents",
    "live",
    "accounts",
    "audit",
    "retention",
    "projects",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "artifactflow.middleware.StaticFilesMiddleware",
    # Pages only: WhiteNoise above answers static files with its own compressed copies, and
    # websockets never pass here. BREACH: Django masks the CSRF token anew in every response.
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The browser's language (its language cookie, else Accept-Language)...
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # What the request changes or does is recorded as its user's, from its address (audit).
    "audit.middleware.AuditContextMiddleware",
    # ...unless the signed-in user chose one (accounts.services).
    "accounts.middleware.UserLanguageMiddleware",
    "artifactflow.middleware.LoginRequiredMiddleware",
    "artifactflow.middleware.PrivateCacheMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out sign-in into its page.
    "axes.middleware.AxesMiddleware",
]

# Scripts, styles and images only from this origin: no inline script or
# handler, and no remote image that a prompt-injected answer could use to
# carry conversation text to another host (answers show images as links).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

ROOT_URLCONF = "artifactflow.urls"
ASGI_APPLICATION = "artifactflow.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.theme",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # First, so a locked-out account is refused before its password is checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Sign-in throttling (django-axes), on /accounts/login/ and /admin/login/ alike:
# after this many wrong passwords in a row for one username, or from one
# address, sign-in is refused until the lockout has passed; each further
# attempt restarts it. A right password before the limit clears the count.
AXES_FAILURE_LIMIT = env.int("ARTIFACTFLOW_LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("ARTIFACTFLOW_LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

LOGIN_URL = "login"
# A set-password link (accounts.onboarding) works once, for this long.
PASSWORD_RESET_TIMEOUT = env.int("ARTIFACTFLOW_PASSWORD_LINK_DAYS", default=7) * 24 * 3600

# Mail, for the set-password links of people added in bulk: without a server
# (EMAIL_HOST unset) the admin is shown each link to pass on.
EMAIL_HOST = env.str("EMAIL_HOST", default="")
EMAIL_PORT = env.int("EMAIL_PORT", default=587)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=True)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="ArtifactFlow <artifactflow@localhost>")
LOGIN_REDIRECT_URL = "chat"
LOGOUT_REDIRECT_URL = "login"

# The groups a person may share a conversation with (conversations.selectors.share_groups):
# off, the groups they are in; on, every group of the portal.
SHARE_ANY_GROUP = env.bool("ARTIFACTFLOW_SHARE_ANY_GROUP", default=False)

# --- Single sign-on (OpenID Connect) --------------------------------------------

# Off unless an issuer is set. The provider's endpoints come from its discovery
# document (accounts.oidc), read at the first sign-in and kept in the cache;
# mozilla-django-oidc runs the authorization code flow with state, nonce and PKCE.
OIDC_ISSUER = env.str("ARTIFACTFLOW_OIDC_ISSUER", default="").rstrip("/")
SSO_ENABLED = bool(OIDC_ISSUER)
OIDC_RP_CLIENT_ID = env.str("ARTIFACTFLOW_OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("ARTIFACTFLOW_OIDC_CLIENT_SECRET", default="")
OIDC_RP_SCOPES = env.str("ARTIFACTFLOW_OIDC_SCOPES", default="openid email profile")
OIDC_RP_SIGN_ALGO = env.str("ARTIFACTFLOW_OIDC_SIGN_ALGO", default="RS256")
# The sign-in button's text; empty: "Sign in with single sign-on", translated.
SSO_BUTTON_LABEL = env.str("ARTIFACTFLOW_OIDC_BUTTON_LABEL", default="")
# The claim a new user's username is taken from (then the e-mail's local part, then sub).
SSO_USERNAME_CLAIM = env.str("ARTIFACTFLOW_OIDC_USERNAME_CLAIM", default="preferred_username")
# A claim listing the user's groups (e.g. "groups"): empty leaves groups to the admin.
SSO_GROUPS_CLAIM = env.str("ARTIFACTFLOW_OIDC_GROUPS_CLAIM", default="")
# Whether a claim value no admin mapped to a group (admin: Provider groups) gets a
# group of its own, named with the prefix (else it is ignored). An existing group
# is never taken for it: that is an admin's to map.
SSO_GROUPS_CREATE = env.bool("ARTIFACTFLOW_OIDC_GROUPS_CREATE", default=True)
SSO_GROUPS_PREFIX = env.str("ARTIFACTFLOW_OIDC_GROUPS_PREFIX", default="")
# Who may sign in: an e-mail domain listed or a group listed; both empty, anyone the provider signs in.
SSO_ALLOWED_DOMAINS = [d.lower().lstrip("@") for d in env.list("ARTIFACTFLOW_OIDC_ALLOWED_DOMAINS", default=[])]
SSO_ALLOWED_GROUPS = env.list("ARTIFACTFLOW_OIDC_ALLOWED_GROUPS", default=[])
# Seconds a request to the provider (discovery, token, keys, userinfo) may take.
OIDC_TIMEOUT = env.float("ARTIFACTFLOW_OIDC_TIMEOUT", default=10.0)
# "all": everyone may sign in with a password; "staff": only staff (the others use SSO).
LOCAL_PASSWORDS = env.str("ARTIFACTFLOW_LOCAL_PASSWORDS", default="all")
if LOCAL_PASSWORDS not in ("all", "staff"):
    raise ImproperlyConfigured("ARTIFACTFLOW_LOCAL_PASSWORDS is 'all' or 'staff'.")
if LOCAL_PASSWORDS == "staff" and not SSO_ENABLED:
    raise ImproperlyConfigured(
        "ARTIFACTFLOW_LOCAL_PASSWORDS=staff leaves non-staff no way in without single sign-on: "
        "set ARTIFACTFLOW_OIDC_ISSUER too."
    )
if SSO_ENABLED and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "ARTIFACTFLOW_OIDC_ISSUER is set: set ARTIFACTFLOW_OIDC_CLIENT_ID and ARTIFACTFLOW_OIDC_CLIENT_SECRET too."
    )
if SSO_ALLOWED_GROUPS and not SSO_GROUPS_CLAIM:
    raise ImproperlyConfigured(
        "ARTIFACTFLOW_OIDC_ALLOWED_GROUPS names groups of the groups claim: set ARTIFACTFLOW_OIDC_GROUPS_CLAIM too."
    )
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True
# Kept for the provider's logout (id_token_hint), never shown.
OIDC_STORE_ID_TOKEN = True
OIDC_AUTHENTICATE_CLASS = "accounts.views.SsoStartView"
OIDC_CALLBACK_CLASS = "accounts.views.SsoCallbackView"
if SSO_ENABLED:
    AUTHENTICATION_BACKENDS.append("accounts.oidc.SsoBackend")
    # The sign-out form's redirect to the provider's end_session_endpoint is a
    # form submission's navigation, which form-action governs.
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append("{0.scheme}://{0.netloc}".format(urlsplit(OIDC_ISSUER)))
if LOCAL_PASSWORDS == "staff":
    AUTHENTICATION_BACKENDS[AUTHENTICATION_BACKENDS.index("django.contrib.auth.backends.ModelBackend")] = (
        "accounts.backends.StaffPasswordBackend"
    )

# The interface speaks English and Simplified Chinese; the catalogue is
# locale/zh_Hans (`make messages` updates it, its .mo ships compiled).
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
WHITENOISE_USE_FINDERS = DEBUG

# Uploaded files are served only through views that check their owner, and
# only the portal's own user can read them on disk.
MEDIA_ROOT = DATA_DIR / "media"
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"file_permissions_mode": 0o600, "directory_permissions_mode": 0o700},
    },
    # nginx, another user, serves collectstatic's output from disk.
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# The error page of DEBUG=1 (and error mails) show settings: Django hides those
# named like secrets, and this filter also the URLs that may carry a password
# (REDIS_URL, the cache's LOCATION, the channel layer's address).
DEFAULT_EXCEPTION_REPORTER_FILTER = "artifactflow.errors.SecretsHiddenFilter"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # django-axes logs every failed sign-in; its lockouts are warnings.
    "loggers": {"django-q": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}

# --- Agent turns ----------------------------------------------------------------

# The longest a turn may run, wall clock, before the worker is stopped.
RUN_TIME_LIMIT = env.int("ARTIFACTFLOW_RUN_TIME_LIMIT", default=30 * 60)

# Turns one worker process runs at once, each in a thread: a turn mostly waits
# on the model, so a process serves many. Size a server database's connections
# for them (ARTIFACTFLOW_DB_POOL_* and Postgres' max_connections).
RUN_TURNS_PER_WORKER = env.int("ARTIFACTFLOW_TURNS_PER_WORKER", default=32)
# A worker process takes queued turns for this long at a stretch, then finishes
# those it has (at most RUN_TIME_LIMIT more) and goes back to django-q2.
RUN_TAKE_SECONDS = RUN_TIME_LIMIT

# Turns of one user that hold a worker at once (queued or running); the rest
# wait for one of them to end, in order, so one person cannot starve the others.
TURNS_PER_USER = env.int("ARTIFACTFLOW_TURNS_PER_USER", default=3)
# Tokens a user's turns may spend a day (from local midnight), unless the
# admin's token budgets say otherwise for them or their group; 0 is unlimited.
DAILY_TOKEN_BUDGET = env.int("ARTIFACTFLOW_DAILY_TOKEN_BUDGET", default=0)

# django-q2 with the ORM broker in the application database: delivery receipts,
# so the task of a worker that dies is delivered again after `retry` seconds.
# `timeout` (the turn is killed) < `retry` (redelivery) keeps one long turn from
# being handed to a second worker while the first still runs; the task also
# claims its run with a conditional update, so a second delivery is a no-op.
# `max_attempts` bounds redelivery of a task that keeps killing its worker.
Q_CLUSTER = {
    "name": "artifactflow",
    "orm": "default",
    "workers": env.int("ARTIFACTFLOW_WORKERS", default=2),
    # A task holds its process while it takes turns and then finishes them
    # (agents.services.execution.run_start): beyond both, or the process is killed.
    "timeout": RUN_TAKE_SECONDS + RUN_TIME_LIMIT + 60,
    "retry": RUN_TAKE_SECONDS + RUN_TIME_LIMIT + 120,
    "max_attempts": 3,
    "ack_failures": True,
    "save_limit": 1000,
    "catch_up": False,
    "poll": 0.2,
}

# --- Backups (artifactflow.backups, docs/deploy.md) ------------------------------

# Set, the workers write a backup here every BACKUP_HOURS and keep the newest
# BACKUP_KEEP (the schedule follows these at each migrate). Unset: none is
# scheduled; `manage.py backup` writes one at any time.
BACKUP_DIR = env.str("ARTIFACTFLOW_BACKUP_DIR", default="")
BACKUP_HOURS = env.int("ARTIFACTFLOW_BACKUP_HOURS", default=24)
BACKUP_KEEP = env.int("ARTIFACTFLOW_BACKUP_KEEP", default=7)

# --- Metrics (artifactflow.metrics, docs/deploy.md) -----------------------------

# /metrics answers a scraper that sends this as a bearer token, or that asks
# from one of these addresses or networks; with neither, no one (404).
METRICS_TOKEN = env.str("ARTIFACTFLOW_METRICS_TOKEN", default="")
try:
    METRICS_NETWORKS = [
        ipaddress.ip_network(network, strict=False)
        for network in env.list("ARTIFACTFLOW_METRICS_ADDRESSES", default=[])
    ]
except ValueError as exc:
    raise ImproperlyConfigured(f"ARTIFACTFLOW_METRICS_ADDRESSES: {exc}") from exc

# /readyz fails when no worker has run its sweep for this long (artifactflow.health).
# The sweep is scheduled once a minute and django-q2's scheduler looks about
# every 30 s: beyond two minutes, no worker is taking turns.
READY_WORKER_SECONDS = env.int("ARTIFACTFLOW_READY_WORKER_SECONDS", default=120)

# A running turn whose heartbeat is older than this is taken for dead. A
# worker beats from a thread of its own every quarter of it, whatever the
# model is doing (a model may think for minutes before its first token).
RUN_HEARTBEAT_STALE = env.int("ARTIFACTFLOW_HEARTBEAT_STALE", default=120)

# How long a worker keeps retrying a write while the database is unreachable
# (artifactflow.db) before the turn fails or is left to the recovery sweep.
DB_RETRY_SECONDS = env.float("ARTIFACTFLOW_DB_RETRY_SECONDS", default=30.0)

# Streamed tokens are written to the event log in batches no more often than
# this; open pages are sent them as they come, every RUN_LIVE_SECONDS (four times
# that while the channel layer is slow), without the database. A page reads the
# rows only when it (re)connects or missed a piece; two seconds keep a streamed
# turn within its 40 rows (tests/agents/services/test_execution.py).
RUN_CHUNK_FLUSH_SECONDS = env.float("ARTIFACTFLOW_CHUNK_FLUSH_SECONDS", default=2.0)
RUN_LIVE_SECONDS = env.float("ARTIFACTFLOW_LIVE_SECONDS", default=0.1)

# A conversation's page opens on this many of its newest turns and loads older
# ones, this many at a time, as the reader scrolls up (agents.thread.thread_page):
# what a page weighs does not grow with the conversation.
THREAD_PAGE_TURNS = 20

# Retention (agents.services.retention): a run that ended this many minutes
# ago has its streamed text folded away and its answer stored once; events of
# conversations idle for ARTIFACTFLOW_EVENT_RETENTION_DAYS are deleted (unset:
# kept for ever).
RUN_FOLD_AFTER_MINUTES = env.int("ARTIFACTFLOW_FOLD_AFTER_MINUTES", default=10)
RUN_EVENT_RETENTION_DAYS = env.int("ARTIFACTFLOW_EVENT_RETENTION_DAYS", default=None)

# A page is pushed what changed at most this often (live.consumers);
# faster changes are coalesced into one push.
WEBSOCKET_PUSH_INTERVAL = 0.05
# Threads a web process gives its websockets' database work, each with its own
# database connection.
WEBSOCKET_THREADS = 8
# Seconds between the checks an open websocket makes that its session still signs
# its user in (a password changed elsewhere ends it); signing out closes it at once.
WEBSOCKET_SESSION_CHECK_INTERVAL = 60.0
# A run a page follows writes a row a second while it streams; one that woke
# the page for none this long is read anyway, so a wake-up the channel layer
# lost (a busy layer drops and expires messages) never leaves a page frozen,
# the run's end included.
WEBSOCKET_QUIET_RUN_SECONDS = 3.0
# A page sends its websocket one short message per connection (the turns it shows
# running): a socket may send this many at once, then one more per second; what
# comes faster is dropped unread (live.sockets).
WEBSOCKET_MESSAGE_BURST = 5
WEBSOCKET_MESSAGES_PER_SECOND = 1.0

# --- Artifacts ------------------------------------------------------------------

ARTIFACT_UPLOAD_MAX_BYTES = env.int("ARTIFACTFLOW_UPLOAD_MAX_BYTES", default=20 * 1024 * 1024)
# A request body larger than the largest upload and its form is refused before
# it is read (artifactflow.limits); nginx's client_max_body_size should match.
REQUEST_BODY_MAX_BYTES = ARTIFACT_UPLOAD_MAX_BYTES + 64 * 1024
# Django refuses form fields (not files) this large when a view reads them.
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Word documents and PDFs (uploads, the library, web_fetch) are read in a child
# process (artifactflow.extraction), stopped after this many seconds or this much
# memory; a process reads this many at once.
EXTRACT_TIMEOUT = env.float("ARTIFACTFLOW_EXTRACT_TIMEOUT", default=60.0)
EXTRACT_MAX_MEMORY_MB = env.int("ARTIFACTFLOW_EXTRACT_MAX_MEMORY_MB", default=1024)
EXTRACT_CONCURRENCY = env.int("ARTIFACTFLOW_EXTRACT_CONCURRENCY", default=2)

# An embeddings model (POST /v1/embeddings of an OpenAI-compatible service),
# for the library's passages to be found by meaning as well as by their words
# (library.vectors). None named: full-text search alone. The service is the
# chat model's unless another is given.
EMBEDDINGS = {
    "model": env.str("ARTIFACTFLOW_EMBEDDINGS_MODEL", default=""),
    "base_url": env.str("ARTIFACTFLOW_EMBEDDINGS_BASE_URL", default="")
    or env.str("OPENAI_BASE_URL", default="")
    or None,
    "api_key": env.str("ARTIFACTFLOW_EMBEDDINGS_API_KEY", default="") or env.str("OPENAI_API_KEY", default=""),
    "timeout": env.float("ARTIFACTFLOW_EMBEDDINGS_TIMEOUT", default=30.0),
}
# Where the passages' vectors are kept on the embedded default: a SQLite file
# of their own beside the database, with sqlite-vec (derived data: `manage.py
# library_reindex` makes it again).
LIBRARY_VECTORS_PATH = Path(
    env.str("ARTIFACTFLOW_LIBRARY_VECTORS_PATH", default=str(DATA_DIR / "library-vectors.sqlite3"))
)

# The OpenAI SDK reads OPENAI_API_KEY and OPENAI_BASE_URL itself; with no key
# the offline demo model answers, so a machine without internet still works.
ARTIFACTFLOW_LLM = {
    "api_key": env.str("OPENAI_API_KEY", default=""),
    "base_url": env.str("OPENAI_BASE_URL", default="") or None,
    "model": env.str("ARTIFACTFLOW_MODEL", default="gpt-4o-mini"),
    "timeout": env.float("ARTIFACTFLOW_MODEL_TIMEOUT", default=120.0),
    "max_retries": env.int("ARTIFACTFLOW_MODEL_RETRIES", default=2),
    # Estimated tokens the model accepts; compaction starts well before it.
    "context_window": env.int("ARTIFACTFLOW_MODEL_CONTEXT_WINDOW", default=128_000),
    "temperature": env.float("ARTIFACTFLOW_MODEL_TEMPERATURE", default=None),
    # "xml": tool calls written in the text (seed 003), which any model can do;
    # "native": the API's function calling, for models that support it well.
    "tool_mode": env.str("ARTIFACTFLOW_TOOL_MODE", default="xml"),
}
# After a conversation's first turn the lead's model proposes its title (agents.titling).
MODEL_TITLES = env.bool("ARTIFACTFLOW_MODEL_TITLES", default=True)
# Seconds between the demo model's words, so its answer streams like a model's.
DEMO_WORD_DELAY = env.float("ARTIFACTFLOW_DEMO_WORD_DELAY", default=0.02)
# Optional TOML file giving agents models of their own (see agents/llm/config.py).
MODELS_FILE = env.str("ARTIFACTFLOW_MODELS_FILE", default="")

# --- Agents -----------------------------------------------------------------------


def _env_pairs(name: str, *, value_ok: Callable[[str], bool], expected: str, example: str) -> dict[str, str]:
    """The variable `name` read as "key=value,key=value", each value checked:
    a setting mistyped is refused at start, not ignored until a turn needs it."""
    pairs = {}
    for item in filter(None, (part.strip() for part in env.str(name, default="").split(","))):
        key, _, value = (side.strip() for side in item.partition("="))
        if not key or not value_ok(value):
            raise ImproperlyConfigured(f"{name}: {item!r} is not {expected}, e.g. {example}.")
        pairs[key] = value
    return pairs


# Per-tool override of whether the user must approve a call (agents.tools.base:
# AUTO, CONFIRM), e.g. ARTIFACTFLOW_TOOL_PERMISSIONS="web_fetch=auto,web_search=confirm".
TOOL_PERMISSIONS = _env_pairs(
    "ARTIFACTFLOW_TOOL_PERMISSIONS",
    value_ok=lambda value: value in ("auto", "confirm"),
    expected="tool=auto or tool=confirm",
    example="web_fetch=auto,web_search=confirm",
)
# Per-agent override of the tool calls an agent may make before it must
# answer (the defaults are in agents/config.py; agent names are checked there),
# e.g. ARTIFACTFLOW_MAX_TOOL_ROUNDS="lead_agent=100,crawl_agent=2".
MAX_TOOL_ROUNDS = {
    agent: int(count)
    for agent, count in _env_pairs(
        "ARTIFACTFLOW_MAX_TOOL_ROUNDS",
        value_ok=lambda count: count.isdecimal() and int(count) >= 1,
        expected="agent=count with a count of at least 1",
        example="lead_agent=100,crawl_agent=2",
    ).items()
}
# An unanswered permission request counts as denied after this many seconds.
PERMISSION_TIMEOUT = env.int("ARTIFACTFLOW_PERMISSION_TIMEOUT", default=3600)
# A tool result longer than this, in characters or in estimated tokens, is
# stored as an artifact and the model gets a preview (seed 001: the byte and
# the token thresholds). In Chinese, Japanese or Korean a character is about a
# token, so the token limit is the one such a result meets first.
TOOL_RESULT_MAX_CHARS = env.int("ARTIFACTFLOW_TOOL_RESULT_MAX_CHARS", default=20_000)
TOOL_RESULT_MAX_TOKENS = env.int("ARTIFACTFLOW_TOOL_RESULT_MAX_TOKENS", default=5_000)
TOOL_RESULT_PREVIEW_CHARS = 2_000
TOOL_RESULT_PREVIEW_TOKENS = 500
# An agent's context is compacted when its estimated tokens pass this share of
# the model's context window.
COMPACTION_THRESHOLD = env.float("ARTIFACTFLOW_COMPACTION_THRESHOLD", default=0.7)

# --- Agents' web tools ------------------------------------------------------------

# web_fetch refuses loopback, private, link-local, multicast and metadata
# addresses. Hosts listed here are exempt (tests fetch from a local server).
FETCH_ALLOWED_HOSTS = env.list("ARTIFACTFLOW_FETCH_ALLOWED_HOSTS", default=[])
FETCH_TIMEOUT = env.float("ARTIFACTFLOW_FETCH_TIMEOUT", default=20.0)
FETCH_MAX_BYTES = env.int("ARTIFACTFLOW_FETCH_MAX_BYTES", default=5 * 1024 * 1024)
FETCH_MAX_REDIRECTS = 5
# What one upload of several files, or of a .zip, may add to the library: how
# many documents, and how many bytes of files once unpacked.
LIBRARY_BULK_MAX_FILES = env.int("ARTIFACTFLOW_LIBRARY_BULK_MAX_FILES", default=500)
LIBRARY_BULK_MAX_BYTES = env.int("ARTIFACTFLOW_LIBRARY_BULK_MAX_BYTES", default=200 * 1024 * 1024)
# What the web pages read in one conversation may keep as snapshots (UTF-8
# bytes of text); pages read beyond it are cited by their live address.
SNAPSHOTS_MAX_BYTES = env.int("ARTIFACTFLOW_SNAPSHOTS_MAX_BYTES", default=20 * 1024 * 1024)

# --- Tools an admin plugs in (agents.toolsources, docs/tools.md) -----------------

# The Fernet key (urlsafe base64 of 32 bytes) their secrets are encrypted with;
# unset, one is derived from SECRET_KEY, so changing SECRET_KEY then makes the
# stored secrets unreadable (each is reported, none crashes a turn).
SECRETS_KEY = env.str("ARTIFACTFLOW_SECRETS_KEY", default="")

# web_search: "searxng", "tavily" or "local" (the team library). Empty picks
# searxng when SEARXNG_URL is set, else tavily when TAVILY_API_KEY is, else local.
SEARCH_PROVIDER = env.str("ARTIFACTFLOW_SEARCH_PROVIDER", default="")
SEARXNG_URL = env.str("SEARXNG_URL", default="")
TAVILY_API_KEY = env.str("TAVILY_API_KEY", default="")
TAVILY_URL = env.str("TAVILY_URL", default="https://api.tavily.com")
SEARCH_MAX_RESULTS = env.int("ARTIFACTFLOW_SEARCH_MAX_RESULTS", default=8)
