"""Runs every benchmark: `make bench` (or `python benchmarks/run.py`)."""

from setup_django import setup

setup()

import budgets  # noqa: E402
import citations  # noqa: E402
import event_log  # noqa: E402
import extraction  # noqa: E402
import faults  # noqa: E402
import large_artifact  # noqa: E402
import matching  # noqa: E402
import message_path  # noqa: E402
import pages  # noqa: E402
import people_edits  # noqa: E402
import project_pages  # noqa: E402
import question_path  # noqa: E402
import renderers  # noqa: E402
import retrieval  # noqa: E402
import search_chinese  # noqa: E402
import security  # noqa: E402
import stop  # noqa: E402
import streaming  # noqa: E402
import team  # noqa: E402
import thread_page  # noqa: E402
import tokens  # noqa: E402
import turn_bytes  # noqa: E402
import turn_cost  # noqa: E402
import usage  # noqa: E402
import websocket_flood  # noqa: E402

# By their package: a plain `import artifacts` (or `admin`, `retention`) is the Django app's.
from benchmarks import admin, artifacts, retention  # noqa: E402

for benchmark in (
    message_path,
    event_log,
    matching,
    tokens,
    security,
    budgets,
    renderers,
    extraction,
    streaming,
    turn_cost,
    turn_bytes,
    retrieval,
    citations,
    stop,
    websocket_flood,
    artifacts,
    large_artifact,
    people_edits,
    pages,
    project_pages,
    search_chinese,
    thread_page,
    team,
    retention,
    admin,
    faults,
    question_path,
    usage,
):
    benchmark.main()
    print()
