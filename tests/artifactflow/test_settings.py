import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load_settings(tmp_path, **env):
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL"}}
    clean.update(ARTIFACTFLOW_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="artifactflow.settings", **env)
    return subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.SECRET_KEY)"],
        cwd=ROOT, env=clean, capture_output=True, text=True,
    )


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    result = _load_settings(tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_debug_generates_one_local_key_and_keeps_it(tmp_path):
    first = _load_settings(tmp_path, DEBUG="1")
    second = _load_settings(tmp_path, DEBUG="1")
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.strip()) > 40
    assert first.stdout == second.stdout


def test_a_server_database_without_redis_is_refused(tmp_path):
    result = _load_settings(tmp_path, SECRET_KEY="x", DATABASE_URL="postgres://u@127.0.0.1:5432/db")
    assert result.returncode != 0
    assert "REDIS_URL is not set" in result.stderr
