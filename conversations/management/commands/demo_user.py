import os
import secrets
import socket
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

# The login `make run` creates and prints; `manage.py ask` asks as it by default.
DEMO_USERNAME = "demo"
# Where the Procfile's daphne listens.
HOST = "127.0.0.1"
# The one word `make run` says about everyone else.
TEAM_NOTE = 'To add your team (users, groups, single sign-on), see README.md, section "Your team".'
# Daphne starts in a few seconds; one that has not listened by then failed,
# and honcho stops this process with it.
WAIT_SECONDS = 120


class Command(BaseCommand):
    help = (
        "Create the local demo login on first use, keep its password in the data directory "
        "(mode 0600) for later runs, and print it with the address to open. Only with DEBUG on."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default=DEMO_USERNAME)
        parser.add_argument("--port", type=int, default=8000, help="The port the portal listens on, for the address.")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="Print only the address line, once the portal accepts connections: last, after the server's own output.",
        )

    def handle(self, *args, username, port, wait, **options):
        if not settings.DEBUG:
            raise CommandError("The demo login exists only for local use: set DEBUG=1.")
        if wait:
            _wait_for_listener(port=port)
        note, password = _demo_login(username=username)
        if not wait:
            self.stdout.write(note)
            self.stdout.write(TEAM_NOTE)
        url = f"http://{HOST}:{port}/"
        if password:
            self.stdout.write(self.style.SUCCESS(f"Open {url} and sign in as {username} / {password}"))
        else:
            self.stdout.write(self.style.WARNING(f"Open {url} and sign in as {username} with the password you set."))


def _demo_login(*, username: str) -> tuple[str, str]:
    """What became of the login, and its password: "" when its user changed it."""
    path = settings.DATA_DIR / f"demo_password_{username}"
    stored = path.read_text().strip() if path.exists() else ""
    user = get_user_model().objects.filter(username=username).first()
    if user is not None and stored:
        if user.check_password(stored):
            return f"The demo login {username} is kept from an earlier run (its password is in {path}).", stored
        return (
            f"The password of {username} was changed since it was stored in {path}, so it is left alone "
            f"(forgot it? manage.py changepassword {username}).",
            "",
        )
    # No user (a new data directory, or a database made anew beside the kept
    # password, which then stays the same), or a user whose password was never
    # stored: before passwords were kept every run printed a new one, so
    # setting one more loses nothing.
    password = stored or secrets.token_urlsafe(9)
    if not stored:
        _store(path=path, password=password)
    user = user or get_user_model()(username=username)
    user.is_staff = user.is_superuser = True
    user.set_password(password)
    user.save()
    return f"Demo login {username} (staff, also for /admin/); its password is kept in {path}.", password


def _store(*, path, password: str) -> None:
    # Only its owner may read it, as the local SECRET_KEY file; made anew (an
    # empty file is read as none) so the mode is the one given here. With a
    # server database nothing else has made the data directory.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as f:
        f.write(password + "\n")


def _wait_for_listener(*, port: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise CommandError(f"Nothing listens on {HOST}:{port} after {WAIT_SECONDS} s.") from None
            time.sleep(0.2)
