"""A long-lived Django shell on a test portal's database: a test seeds and reads
the portal through it without paying a new Python and django.setup() per call.

    python -m tests.portal_shell

reads one JSON line per request, {"code": "..."}, runs the code in a fresh
namespace and answers one JSON line, {"out": what it printed} or {"error":
the traceback}. It ends when its stdin closes, with the test process.
"""

import contextlib
import io
import json
import sys
import traceback

import django


def main() -> None:
    django.setup()
    from django.db import connections

    answers = sys.stdout
    for line in sys.stdin:
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(json.loads(line)["code"], {"__name__": "__portal_shell__"})
            answer = {"out": printed.getvalue()}
        except BaseException:
            answer = {"error": traceback.format_exc()}
        finally:
            # A held connection would keep a SQLite read snapshot or a Postgres session
            # open between calls, while the portal's own processes write; a pool (Postgres
            # with ARTIFACTFLOW_DB_POOL_*) would keep its connections however closed.
            for connection in connections.all(initialized_only=True):
                connection.close()
                if hasattr(connection, "close_pool"):
                    connection.close_pool()
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
