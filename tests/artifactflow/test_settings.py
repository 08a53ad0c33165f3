import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STRONG_KEY = "k3y-for-tests-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFG"
# What the README asks of a production install behind nginx with TLS.
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": STRONG_KEY,
    "ALLOWED_HOSTS": "portal.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://portal.example.com",
}


def _run(tmp_path, *args, **env):
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL"}}
    clean.update({"ARTIFACTFLOW_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "artifactflow.settings", **env})
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=clean, capture_output=True, text=True)


def _load_settings(tmp_path, **env):
    return _run(tmp_path, "-c", "from django.conf import settings; print(settings.SECRET_KEY)", **env)


def test_a_server_database_refuses_to_start_without_a_secret_key(tmp_path):
    for debug in ("0", "1"):
        result = _load_settings(
            tmp_path, DEBUG=debug, DATABASE_URL="postgres://u@127.0.0.1:5432/db", REDIS_URL="redis://x"
        )
        assert result.returncode != 0
        assert "SECRET_KEY is not set" in result.stderr
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize("key", ["short", "x" * 60, "django-insecure-" + "abcdefghij" * 5])
def test_production_refuses_a_weak_secret_key(tmp_path, key):
    result = _load_settings(tmp_path, SECRET_KEY=key)
    assert result.returncode != 0
    assert "SECRET_KEY is too weak for production" in result.stderr


def test_the_embedded_database_generates_one_local_key_only_its_owner_can_read(tmp_path):
    # No DEBUG, nothing exported: manage.py after `make run` just works.
    first = _load_settings(tmp_path)
    second = _load_settings(tmp_path, DEBUG="1")
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.strip()) > 40
    assert first.stdout == second.stdout
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600


def test_a_server_database_starts_without_making_a_directory_or_writing_a_file(tmp_path):
    data = tmp_path / "data"
    probe = "import django; django.setup(); import artifactflow.urls; print('loaded')"
    server = {"DATABASE_URL": "postgres://u@127.0.0.1:5432/db", "REDIS_URL": "redis://x"}

    result = _run(tmp_path, "-c", probe, ARTIFACTFLOW_DATA_DIR=str(data), SECRET_KEY=STRONG_KEY, **server)

    assert result.stdout.strip() == "loaded", result.stderr
    assert not data.exists()


def test_a_server_database_without_redis_is_refused(tmp_path):
    result = _load_settings(tmp_path, SECRET_KEY=STRONG_KEY, DATABASE_URL="postgres://u@127.0.0.1:5432/db")
    assert result.returncode != 0
    assert "REDIS_URL is not set" in result.stderr


def test_the_production_settings_pass_djangos_deployment_checks(tmp_path):
    result = _run(tmp_path, "manage.py", "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_behind_a_tls_proxy_plain_http_is_redirected_and_https_gets_hsts(tmp_path):
    probe = (
        "import django; django.setup(); from django.test import Client; c = Client(); "
        "http = c.get('/accounts/login/', HTTP_HOST='portal.example.com'); "
        "https = c.get('/accounts/login/', HTTP_HOST='portal.example.com', HTTP_X_FORWARDED_PROTO='https'); "
        "print(http.status_code, http['Location']); print(https.status_code, https['Strict-Transport-Security']); "
        "print(https.cookies['csrftoken']['secure'])"
    )
    result = _run(tmp_path, "-c", probe, **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "301 https://portal.example.com/accounts/login/",
        "200 max-age=31536000; includeSubDomains; preload",
        "True",
    ]


def test_plain_http_origins_keep_plain_http_working(tmp_path):
    probe = "import django; django.setup(); from django.test import Client; print(Client().get('/accounts/login/', HTTP_HOST='wiki.lan').status_code)"
    result = _run(
        tmp_path, "-c", probe, **{**PRODUCTION, "ALLOWED_HOSTS": "wiki.lan", "CSRF_TRUSTED_ORIGINS": "http://wiki.lan"}
    )
    assert result.stdout.strip() == "200", result.stderr


@pytest.mark.parametrize(
    "setting, variable, value, read",
    [
        (
            "MAX_TOOL_ROUNDS",
            "ARTIFACTFLOW_MAX_TOOL_ROUNDS",
            " lead_agent=50, crawl_agent=4,",
            "{'lead_agent': 50, 'crawl_agent': 4}",
        ),
        (
            "TOOL_PERMISSIONS",
            "ARTIFACTFLOW_TOOL_PERMISSIONS",
            " web_fetch=auto, web_search=confirm,",
            "{'web_fetch': 'auto', 'web_search': 'confirm'}",
        ),
    ],
)
def test_agents_tool_rounds_and_permissions_can_be_set_from_the_environment(tmp_path, setting, variable, value, read):
    probe = f"from django.conf import settings; print(settings.{setting})"
    unset = _run(tmp_path, "-c", probe, SECRET_KEY=STRONG_KEY)
    result = _run(tmp_path, "-c", probe, SECRET_KEY=STRONG_KEY, **{variable: value})
    assert unset.stdout.strip() == "{}", unset.stderr
    assert result.stdout.strip() == read, result.stderr


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
def test_a_malformed_tool_rounds_or_permissions_setting_is_refused_saying_what_is_wrong(tmp_path, setting, item):
    variable, valid, expected = setting
    result = _load_settings(tmp_path, SECRET_KEY=STRONG_KEY, **{variable: f"{valid},{item}"})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"{variable}: {item!r} is not {expected}" in result.stderr


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


def test_the_embedded_database_and_uploads_are_readable_by_their_owner_only(tmp_path):
    """The SQLite file was created 0644 beside a 0600 key."""
    # The modes are read while the connection is open: SQLite removes its -wal file on closing.
    probe = (
        "import django, os, pathlib, stat; django.setup(); from django.db import connection; "
        "connection.cursor().execute('CREATE TABLE t (x)'); "
        "from django.core.files.storage import default_storage; from django.core.files.base import ContentFile; "
        "default_storage.save('artifacts/s/研究.md', ContentFile(b'x')); "
        "print(sorted((str(p.relative_to(os.environ['ARTIFACTFLOW_DATA_DIR'])), oct(stat.S_IMODE(p.stat().st_mode))) "
        "for p in pathlib.Path(os.environ['ARTIFACTFLOW_DATA_DIR']).rglob('*')))"
    )
    result = _run(tmp_path, "-c", probe)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(
        [
            ("artifactflow.sqlite3", "0o600"),
            ("artifactflow.sqlite3-shm", "0o600"),
            ("artifactflow.sqlite3-wal", "0o600"),
            ("media", "0o700"),
            ("media/artifacts", "0o700"),
            ("media/artifacts/s", "0o700"),
            ("media/artifacts/s/研究.md", "0o600"),
            ("secret_key", "0o600"),
        ]
    )


def test_a_database_file_made_before_is_made_owner_only(tmp_path):
    (tmp_path / "artifactflow.sqlite3").touch(mode=0o644)

    assert _load_settings(tmp_path).returncode == 0
    assert stat.S_IMODE((tmp_path / "artifactflow.sqlite3").stat().st_mode) == 0o600


def test_the_debug_error_page_hides_passwords_in_urls_and_addresses(tmp_path):
    probe = (
        "import django; django.setup(); from django.views.debug import get_default_exception_reporter_filter as f; "
        "s = f().get_safe_settings(); print(s['REDIS_URL'], s['CACHES'], s['CHANNEL_LAYERS'], s['DATABASES'])"
    )
    server = {
        "DATABASE_URL": "postgres://u:db-pass-123@127.0.0.1:5432/db",
        "REDIS_URL": "redis://:redis-pass-456@127.0.0.1:6379/0",
    }

    result = _run(tmp_path, "-c", probe, DEBUG="1", SECRET_KEY=STRONG_KEY, **server)

    assert result.returncode == 0, result.stderr
    assert "redis-pass-456" not in result.stdout and "db-pass-123" not in result.stdout
    assert result.stdout.count("********************") >= 4


def test_a_server_database_is_pooled_per_process(tmp_path):
    probe = (
        "from django.conf import settings; d = settings.DATABASES['default']; print(d['CONN_MAX_AGE'], d['OPTIONS'])"
    )
    server = {"DATABASE_URL": "postgres://u@127.0.0.1:5432/db?sslmode=require", "REDIS_URL": "redis://x"}

    default = _run(tmp_path, "-c", probe, SECRET_KEY=STRONG_KEY, **server)
    larger = _run(tmp_path, "-c", probe, SECRET_KEY=STRONG_KEY, ARTIFACTFLOW_DB_POOL_MAX_SIZE="50", **server)

    assert default.stdout.strip() == (
        "0 {'sslmode': 'require', 'pool': {'name': 'artifactflow', 'min_size': 1, 'max_size': 20, 'timeout': 10.0}}"
    ), default.stderr
    assert "'max_size': 50" in larger.stdout, larger.stderr


def test_conn_max_age_is_refused_now_that_connections_are_pooled(tmp_path):
    server = {"DATABASE_URL": "postgres://u@127.0.0.1:5432/db", "REDIS_URL": "redis://x"}
    result = _load_settings(tmp_path, SECRET_KEY=STRONG_KEY, CONN_MAX_AGE="60", **server)
    assert result.returncode != 0
    assert "ARTIFACTFLOW_DB_POOL_MAX_SIZE" in result.stderr


def test_single_sign_on_settings_that_cannot_work_refuse_to_start(tmp_path):
    staff_only = _load_settings(tmp_path, ARTIFACTFLOW_LOCAL_PASSWORDS="staff")
    assert staff_only.returncode != 0
    assert "ARTIFACTFLOW_LOCAL_PASSWORDS=staff leaves non-staff no way in" in staff_only.stderr
    no_client = _load_settings(tmp_path, ARTIFACTFLOW_OIDC_ISSUER="https://id.example.com")
    assert no_client.returncode != 0
    assert "set ARTIFACTFLOW_OIDC_CLIENT_ID and ARTIFACTFLOW_OIDC_CLIENT_SECRET too" in no_client.stderr
    no_claim = _load_settings(
        tmp_path,
        ARTIFACTFLOW_OIDC_ISSUER="https://id.example.com",
        ARTIFACTFLOW_OIDC_CLIENT_ID="portal",
        ARTIFACTFLOW_OIDC_CLIENT_SECRET="s3cret",
        ARTIFACTFLOW_OIDC_ALLOWED_GROUPS="research",
    )
    assert no_claim.returncode != 0
    assert "set ARTIFACTFLOW_OIDC_GROUPS_CLAIM too" in no_claim.stderr


def test_single_sign_on_lets_sign_out_reach_the_provider_only(tmp_path):
    probe = (
        "from django.conf import settings; "
        "print(settings.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action'], settings.AUTHENTICATION_BACKENDS)"
    )
    off = _run(tmp_path, "-c", probe)
    assert (
        off.stdout.strip()
        == "[\"'self'\"] ['axes.backends.AxesStandaloneBackend', 'django.contrib.auth.backends.ModelBackend']"
    )
    on = _run(
        tmp_path,
        "-c",
        probe,
        ARTIFACTFLOW_OIDC_ISSUER="https://id.example.com:8443/realms/team/",
        ARTIFACTFLOW_OIDC_CLIENT_ID="portal",
        ARTIFACTFLOW_OIDC_CLIENT_SECRET="s3cret",
        ARTIFACTFLOW_LOCAL_PASSWORDS="staff",
    )
    assert on.stdout.strip() == (
        "[\"'self'\", 'https://id.example.com:8443'] ['axes.backends.AxesStandaloneBackend', "
        "'accounts.backends.StaffPasswordBackend', 'accounts.oidc.SsoBackend']"
    )
