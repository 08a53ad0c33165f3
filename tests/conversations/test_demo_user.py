import io
import socket
import stat
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def local(settings, tmp_path):
    """As `make run` has it: DEBUG on, and a data directory of the test's own."""
    settings.DEBUG = True
    settings.DATA_DIR = tmp_path
    return tmp_path


def _run(*args) -> list[str]:
    out = io.StringIO()
    call_command("demo_user", *args, stdout=out)
    return out.getvalue().strip().splitlines()


def _password(lines: list[str]) -> str:
    return lines[-1].rsplit(" / ", 1)[1]


def test_the_demo_login_exists_only_with_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="only for local use"):
        call_command("demo_user")
    assert not get_user_model().objects.exists()


def test_the_first_run_ends_with_the_address_and_a_password_that_signs_in(local, client):
    lines = _run()

    assert lines[-1].startswith("Open http://127.0.0.1:8000/ and sign in as demo / ")
    response = client.post("/accounts/login/", {"username": "demo", "password": _password(lines)})
    assert response.status_code == 302 and "_auth_user_id" in client.session
    assert get_user_model().objects.get(username="demo").is_superuser


def test_the_run_points_at_the_readmes_section_on_adding_the_team(local):
    lines = _run()

    assert 'To add your team (users, groups, single sign-on), see README.md, section "Your team".' in lines
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "\n## Your team\n" in readme


def test_the_password_is_kept_across_runs_in_a_file_only_its_owner_reads(local):
    first = _password(_run())
    second = _password(_run())

    assert second == first
    path = local / "demo_password_demo"
    assert path.read_text().strip() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert get_user_model().objects.get(username="demo").check_password(first)


def test_a_database_made_anew_gets_the_kept_password_again(local):
    first = _password(_run())
    get_user_model().objects.all().delete()

    assert _password(_run()) == first
    assert get_user_model().objects.get(username="demo").check_password(first)


def test_a_password_the_user_changed_is_left_alone_and_not_printed(local):
    stored = _password(_run())
    user = get_user_model().objects.get(username="demo")
    user.set_password("my own choice 42")
    user.save()

    lines = _run()

    assert "was changed" in lines[0] and stored not in "\n".join(lines)
    assert lines[-1] == "Open http://127.0.0.1:8000/ and sign in as demo with the password you set."
    user.refresh_from_db()
    assert user.check_password("my own choice 42")


def test_the_address_has_the_port_it_is_given(local):
    assert _run("--port", "8123")[-1].startswith("Open http://127.0.0.1:8123/ and sign in as demo / ")


def test_with_wait_only_the_address_line_is_printed_once_the_port_listens(local):
    stored = _password(_run())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = socket.socket()
    late = 0.5

    def listen_late():
        time.sleep(late)
        server.bind(("127.0.0.1", port))
        server.listen()

    threading.Thread(target=listen_late, daemon=True).start()
    started = time.monotonic()
    try:
        lines = _run("--port", str(port), "--wait")
    finally:
        server.close()

    assert time.monotonic() - started >= late
    assert lines == [f"Open http://127.0.0.1:{port}/ and sign in as demo / {stored}"]
