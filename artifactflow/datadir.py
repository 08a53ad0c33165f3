"""The embedded default's local secret key, kept in its data directory.

Settings only read it: `migrate` makes it (artifactflow/management/commands/
migrate.py), so importing the settings writes nothing, and a process started
before the first `migrate` is told by the system checks what to run
(artifactflow.checks). Kept in a file so the web process and the workers agree
on it (django-q2 signs task payloads with it) and sessions survive a restart.
"""

import os
import secrets
from pathlib import Path

KEY_FILE = "secret_key"


def local_secret_key_read(*, data_dir: Path) -> str:
    """The key kept in `data_dir`; empty when none was made yet."""
    try:
        return (data_dir / KEY_FILE).read_text().strip()
    except FileNotFoundError:
        return ""


def local_secret_key_make(*, data_dir: Path) -> str:
    """The key kept in `data_dir`, made (readable by its owner only) if missing."""
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(data_dir / KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return local_secret_key_read(data_dir=data_dir)
