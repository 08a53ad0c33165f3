"""Runs every benchmark: `make bench` (or `python benchmarks/run.py`)."""

from setup_django import setup

setup()

import event_log  # noqa: E402
import matching  # noqa: E402
import message_path  # noqa: E402
import security  # noqa: E402

for benchmark in (message_path, event_log, matching, security):
    benchmark.main()
    print()
