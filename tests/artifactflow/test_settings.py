"""artifactflow/settings.py, run afresh in this process with the environment
each test gives it (the `load` fixture): what it sets, and what it refuses.
Only a test that needs a fresh interpreter starts one."""

import io
import os
import re
import runpy
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.db.utils import ConnectionHandler
from django.test import Client, override_settings
from django.utils.module_loading import import_string

from artifactflow.datadir import local_secret_key_make

ROOT = Path(__file__).resolve().parents[2]
STRONG_KEY = "k3y-for-tests-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFG"
# What the README asks of a production install behind nginx with TLS.
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": STRONG_KEY,
    "ALLOWED_HOSTS": "portal.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://portal.example.com",
}
SERVER = {"DATABASE_URL": "postgres://u@127.0.0.1:5432/db", "REDIS_URL": "redis://x"}
# The test process's own database, cache, channel layer, apps and files, kept
# when a test puts settings loaded here in force.
OWN_SETTINGS = {"DATABASES", "CACHES", "CHANNEL_LAYERS", "INSTALLED_APPS", "DATA_DIR", "MEDIA_ROOT", "STATIC_ROOT"}


@pytest.fixture
def load(tmp_path, monkeypatch):
    """`load(**environment)`: the settings artifactflow/settings.py makes in that
    environment, as a dict, with its data directory in tmp_path; what it refuses, raised."""
    for name in ("SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)

    def load(**environment):
        with monkeypatch.context() as patched:
            for name, value in {"ARTIFACTFLOW_DATA_DIR": str(tmp_path), **environment}.items():
                patched.setenv(name, value)
            return runpy.run_path(str(ROOT / "artifactflow" / "settings.py"), run_name="artifactflow.settings")

    return load


def in_force(loaded: dict):
    """The settings `loaded` in force in this process, but for its own database, cache and apps."""
    return override_settings(
        **{name: value for name, value in loaded.items() if name.isupper() and name not in OWN_SETTINGS}
    )


def test_a_server_database_refuses_to_start_without_a_secret_key(tmp_path, load):
    for debug in ("0", "1"):
        with pytest.raises(ImproperlyConfigured, match="SECRET_KEY is not set"):
            load(DEBUG=debug, **SERVER)
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize("key", ["short", "x" * 60, "django-insecure-" + "abcdefghij" * 5])
def test_production_refuses_a_weak_secret_key(load, key):
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY is too weak for production"):
        load(SECRET_KEY=key)


def test_the_embedded_settings_write_nothing_and_read_the_one_key_migrate_makes(tmp_path, load):
    assert load()["SECRET_KEY"] == ""
    assert list(tmp_path.iterdir()) == []

    made = local_secret_key_make(data_dir=tmp_path)

    # No DEBUG, nothing exported: manage.py after `make run` just works.
    assert len(made) > 40
    assert load()["SECRET_KEY"] == load(DEBUG="1")["SECRET_KEY"] == made == local_secret_key_make(data_dir=tmp_path)
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600


# A fresh interpreter: this one set Django up (apps ready, URLconf imported) long ago, with the tests' settings.
@pytest.mark.processes
def test_a_server_database_starts_without_making_a_directory_or_writing_a_file(tmp_path):
    data = tmp_path / "data"
    probe = "import django; django.setup(); import artifactflow.urls; print('loaded')"
    environment = {name: value for name, value in os.environ.items() if name not in {"SECRET_KEY", "DEBUG"}}
    environment.update(
        DJANGO_SETTINGS_MODULE="artifactflow.settings", ARTIFACTFLOW_DATA_DIR=str(data), SECRET_KEY=STRONG_KEY, **SERVER
    )

    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=environment, capture_output=True, text=True)

    assert result.stdout.strip() == "loaded", result.stderr
    assert not data.exists()


def test_a_server_database_without_redis_is_refused(load):
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL is not set"):
        load(SECRET_KEY=STRONG_KEY, DATABASE_URL=SERVER["DATABASE_URL"])


def test_the_production_settings_pass_djangos_deployment_checks(load):
    out = io.StringIO()
    with in_force(load(**PRODUCTION)):
        call_command("check", "--deploy", "--fail-level", "WARNING", stdout=out)
    assert "System check identified no issues (0 silenced)." in out.getvalue()


@pytest.mark.django_db
def test_behind_a_tls_proxy_plain_http_is_redirected_and_https_gets_hsts(load):
    with in_force(load(**PRODUCTION)):
        client = Client()
        http = client.get("/accounts/login/", HTTP_HOST="portal.example.com")
        https = client.get("/accounts/login/", HTTP_HOST="portal.example.com", HTTP_X_FORWARDED_PROTO="https")

    assert (http.status_code, http["Location"]) == (301, "https://portal.example.com/accounts/login/")
    assert (https.status_code, https["Strict-Transport-Security"]) == (
        200,
        "max-age=31536000; includeSubDomains; preload",
    )
    assert https.cookies["csrftoken"]["secure"] is True


@pytest.mark.django_db
def test_plain_http_origins_keep_plain_http_working(load):
    with in_force(load(**{**PRODUCTION, "ALLOWED_HOSTS": "wiki.lan", "CSRF_TRUSTED_ORIGINS": "http://wiki.lan"})):
        response = Client().get("/accounts/login/", HTTP_HOST="wiki.lan")
    assert response.status_code == 200
    assert "Strict-Transport-Security" not in response


@pytest.mark.parametrize(
    "setting, variable, value, read",
    [
        (
            "MAX_TOOL_ROUNDS",
            "ARTIFACTFLOW_MAX_TOOL_ROUNDS",
            " lead_agent=50, crawl_agent=4,",
            {"lead_agent": 50, "crawl_agent": 4},
        ),
        (
            "TOOL_PERMISSIONS",
            "ARTIFACTFLOW_TOOL_PERMISSIONS",
            " web_fetch=auto, web_search=confirm,",
            {"web_fetch": "auto", "web_search": "confirm"},
        ),
    ],
)
def test_agents_tool_rounds_and_permissions_can_be_set_from_the_environment(load, setting, variable, value, read):
    assert load(SECRET_KEY=STRONG_KEY)[setting] == {}
    assert load(SECRET_KEY=STRONG_KEY, **{variable: value})[setting] == read


ROUNDS = ("ARTIFACTFLOW_MAX_TOOL_ROUNDS", "search_agent=3", "agent=count with a count of at least 1")
PERMISSIONS = ("ARTIFACTFLOW_TOOL_PERMISSIONS", "web_search=confirm", "tool=auto or tool=confirm")


@pytest.mark.parametrize(
    "setting, item",
    [
        (ROUNDS, item)
        for item in ["lead_agent", "lead_agent=many", "lead_agent=0", "lead_agent=-1", "=3", "lead_agent=2=3"]
    ]
    + [
        (PERMISSIONS, item)
        for item in ["web_fetch", "web_fetch=", "web_fetch=ask", "web_fetch=Auto", "=auto", "web_fetch=auto=1"]
    ],
)
def test_a_malformed_tool_rounds_or_permissions_setting_is_refused_saying_what_is_wrong(load, setting, item):
    variable, valid, expected = setting
    with pytest.raises(ImproperlyConfigured) as refused:
        load(SECRET_KEY=STRONG_KEY, **{variable: f"{valid},{item}"})
    assert f"{variable}: {item!r} is not {expected}" in str(refused.value)


# env.str("NAME", …), _env_pairs("NAME", …) (artifactflow.settings), os.environ["NAME"], os.environ.get("NAME"),
# os.getenv("NAME")
_ENVIRONMENT_READ = re.compile(
    r"""(?:\benv\.\w+\(|\b_env_pairs\(|os\.environ(?:\.get\(|\[)|getenv\()\s*["']([A-Z][A-Z0-9_]*)["']"""
)
_NOT_SOURCE = {"tests", "data", "node_modules", "static", "templates"}


def test_the_readme_names_every_environment_variable_the_code_reads():
    read = set()
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories if not d.startswith(".") and d not in _NOT_SOURCE]
        for name in files:
            if name.endswith(".py"):
                read |= set(_ENVIRONMENT_READ.findall((Path(directory) / name).read_text()))
    readme = (ROOT / "README.md").read_text()
    configuration = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in configuration.splitlines() if line.startswith("| `"))

    assert {"SECRET_KEY", "DATABASE_URL", "ARTIFACTFLOW_DATA_DIR"} <= read
    assert sorted(name for name in read if f"`{name}`" not in table) == []


def test_the_embedded_database_and_uploads_are_readable_by_their_owner_only(tmp_path, load, django_db_blocker):
    """The SQLite file was created 0644 beside a 0600 key."""
    local_secret_key_make(data_dir=tmp_path)
    embedded = load()
    databases = ConnectionHandler({"default": embedded["DATABASES"]["default"]})
    uploads = embedded["STORAGES"]["default"]
    storage = import_string(uploads["BACKEND"])(location=embedded["MEDIA_ROOT"], **uploads["OPTIONS"])

    with django_db_blocker.unblock():
        try:
            databases["default"].cursor().execute("CREATE TABLE t (x)")
            storage.save("artifacts/s/研究.md", ContentFile(b"x"))
            # Read while the connection is open: SQLite removes its -wal file on closing.
            modes = sorted(
                (str(path.relative_to(tmp_path)), oct(stat.S_IMODE(path.stat().st_mode)))
                for path in tmp_path.rglob("*")
            )
        finally:
            databases.close_all()

    assert modes == [
        ("artifactflow.sqlite3", "0o600"),
        ("artifactflow.sqlite3-shm", "0o600"),
        ("artifactflow.sqlite3-wal", "0o600"),
        ("media", "0o700"),
        ("media/artifacts", "0o700"),
        ("media/artifacts/s", "0o700"),
        ("media/artifacts/s/研究.md", "0o600"),
        ("secret_key", "0o600"),
    ]


def test_a_database_file_made_before_is_made_owner_only(tmp_path, load, django_db_blocker):
    (tmp_path / "artifactflow.sqlite3").touch(mode=0o644)
    databases = ConnectionHandler({"default": load()["DATABASES"]["default"]})

    with django_db_blocker.unblock():
        try:
            databases["default"].ensure_connection()
        finally:
            databases.close_all()

    assert stat.S_IMODE((tmp_path / "artifactflow.sqlite3").stat().st_mode) == 0o600


def test_the_debug_error_page_hides_passwords_in_urls_and_addresses(load):
    debug = load(
        DEBUG="1",
        SECRET_KEY=STRONG_KEY,
        DATABASE_URL="postgres://u:db-pass-123@127.0.0.1:5432/db",
        REDIS_URL="redis://:redis-pass-456@127.0.0.1:6379/0",
    )
    # What the error page's filter shows of each setting (get_safe_settings asks it of every one).
    hidden = import_string(debug["DEFAULT_EXCEPTION_REPORTER_FILTER"])()
    shown = str(
        [hidden.cleanse_setting(name, debug[name]) for name in ("REDIS_URL", "CACHES", "CHANNEL_LAYERS", "DATABASES")]
    )

    assert "redis-pass-456" not in shown and "db-pass-123" not in shown
    assert shown.count("********************") >= 4


def test_a_server_database_is_pooled_per_process(load):
    server = {**SERVER, "DATABASE_URL": SERVER["DATABASE_URL"] + "?sslmode=require"}

    default = load(SECRET_KEY=STRONG_KEY, **server)["DATABASES"]["default"]
    larger = load(SECRET_KEY=STRONG_KEY, ARTIFACTFLOW_DB_POOL_MAX_SIZE="50", **server)["DATABASES"]["default"]

    assert default["CONN_MAX_AGE"] == 0
    assert default["OPTIONS"] == {
        "sslmode": "require",
        "pool": {"name": "artifactflow", "min_size": 1, "max_idle": 600.0, "max_size": 20, "timeout": 10.0},
    }
    assert larger["OPTIONS"]["pool"]["max_size"] == 50
    quicker = load(SECRET_KEY=STRONG_KEY, ARTIFACTFLOW_DB_POOL_MAX_IDLE="15", **server)["DATABASES"]["default"]
    assert quicker["OPTIONS"]["pool"]["max_idle"] == 15.0


def test_conn_max_age_is_refused_now_that_connections_are_pooled(load):
    with pytest.raises(ImproperlyConfigured, match="ARTIFACTFLOW_DB_POOL_MAX_SIZE"):
        load(SECRET_KEY=STRONG_KEY, CONN_MAX_AGE="60", **SERVER)


def test_single_sign_on_settings_that_cannot_work_refuse_to_start(load):
    with pytest.raises(ImproperlyConfigured, match="ARTIFACTFLOW_LOCAL_PASSWORDS=staff leaves non-staff no way in"):
        load(ARTIFACTFLOW_LOCAL_PASSWORDS="staff")
    with pytest.raises(
        ImproperlyConfigured, match="set ARTIFACTFLOW_OIDC_CLIENT_ID and ARTIFACTFLOW_OIDC_CLIENT_SECRET too"
    ):
        load(ARTIFACTFLOW_OIDC_ISSUER="https://id.example.com")
    with pytest.raises(ImproperlyConfigured, match="set ARTIFACTFLOW_OIDC_GROUPS_CLAIM too"):
        load(
            ARTIFACTFLOW_OIDC_ISSUER="https://id.example.com",
            ARTIFACTFLOW_OIDC_CLIENT_ID="portal",
            ARTIFACTFLOW_OIDC_CLIENT_SECRET="s3cret",
            ARTIFACTFLOW_OIDC_ALLOWED_GROUPS="research",
        )


def test_single_sign_on_lets_sign_out_reach_the_provider_only(load):
    off = load()
    assert off["CONTENT_SECURITY_POLICY"]["DIRECTIVES"]["form-action"] == ["'self'"]
    assert off["AUTHENTICATION_BACKENDS"] == [
        "axes.backends.AxesStandaloneBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    on = load(
        ARTIFACTFLOW_OIDC_ISSUER="https://id.example.com:8443/realms/team/",
        ARTIFACTFLOW_OIDC_CLIENT_ID="portal",
        ARTIFACTFLOW_OIDC_CLIENT_SECRET="s3cret",
        ARTIFACTFLOW_LOCAL_PASSWORDS="staff",
    )
    assert on["CONTENT_SECURITY_POLICY"]["DIRECTIVES"]["form-action"] == ["'self'", "https://id.example.com:8443"]
    assert on["AUTHENTICATION_BACKENDS"] == [
        "axes.backends.AxesStandaloneBackend",
        "accounts.backends.StaffPasswordBackend",
        "accounts.oidc.SsoBackend",
    ]
