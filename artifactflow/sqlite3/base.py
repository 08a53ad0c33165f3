"""Django's SQLite backend, with the SQL function the search triggers and
views call (artifactflow.textsearch.cjk_split) on every connection it opens,
as Django registers its own functions: no connection can write a message
without it. It makes the database file where it is first opened, readable by
its owner alone like the key beside it (SQLite gives its -wal and -shm files
the same mode), so that importing the settings need write nothing."""

import functools
import os
from pathlib import Path

from django.db.backends.sqlite3 import base

from artifactflow.textsearch import cjk_split


# Once per process and file: Django opens a SQLite connection per request.
@functools.cache
def _owner_only(name) -> None:
    if not isinstance(name, str | Path) or str(name) in ("", ":memory:") or str(name).startswith("file:"):
        return
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        mode = path.stat().st_mode
        if mode & 0o077:
            path.chmod(mode & 0o700)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        _owner_only(conn_params["database"])
        connection = super().get_new_connection(conn_params)
        connection.create_function("cjk_split", 1, cjk_split, deterministic=True)
        return connection
