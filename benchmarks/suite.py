"""Where the suite's time goes: runs pytest, then prints its wall time, the test
time per directory, the 30 slowest files and tests (setup, call and teardown together,
from pytest's JUnit XML, so a portal or a browser started for a test counts in
its time) and how many portal templates, portals and Chromiums the run started
(tests.processes.start_record logs each to the file ARTIFACTFLOW_TEST_STARTS_LOG
names), with the files that started them.

    python benchmarks/suite.py [pytest arguments]

Without arguments it runs the whole suite as `make test` does (three processes,
a file's tests in one); with them, pytest gets them as they are, e.g.
`python benchmarks/suite.py -n 0 tests/artifactflow/test_urls.py`. Not part of
`make bench`: it is the suite, minutes long. Uses DATABASE_URL and REDIS_URL as
the suite does. Exits with pytest's status.
"""

import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOWEST = 30
# What `make test` runs (TEST_WORKERS=3).
MAKE_TEST = ["-n", "3", "--dist", "loadfile"]


def durations(junit: Path) -> list[tuple[float, str]]:
    """(seconds, test) of every test that ran."""
    return [
        (float(case.get("time") or 0), f"{case.get('classname')}::{case.get('name')}")
        for case in ElementTree.parse(junit).getroot().iter("testcase")
    ]


def by_directory(times: list[tuple[float, str]]) -> collections.Counter:
    """Seconds of test time per directory of tests ("tests.e2e", "tests.agents.tools", …)."""
    spent = collections.Counter()
    for seconds, test in times:
        spent[test.split("::")[0].rsplit(".", 1)[0]] += seconds
    return spent


def by_file(times: list[tuple[float, str]]) -> collections.Counter:
    """Seconds of test time per test file ("tests.e2e.test_pane", …)."""
    spent = collections.Counter()
    for seconds, test in times:
        spent[test.split("::")[0]] += seconds
    return spent


def starts(log: Path) -> dict[str, collections.Counter]:
    """Per kind ("portal", "chromium"), how many each test file started."""
    counted = collections.defaultdict(collections.Counter)
    if log.exists():
        for line in log.read_text().splitlines():
            kind, _, test = line.partition(" ")
            counted[kind][test.split("::")[0] or "?"] += 1
    return counted


def main(arguments: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="artifactflow-suite-") as directory:
        junit, log = Path(directory) / "junit.xml", Path(directory) / "starts.log"
        command = [sys.executable, "-m", "pytest", *(arguments or MAKE_TEST), f"--junitxml={junit}", "-q"]
        began = time.monotonic()
        # As make test runs it: compiled once (the Makefile's note on PYTHONDONTWRITEBYTECODE).
        env = {**os.environ, "ARTIFACTFLOW_TEST_STARTS_LOG": str(log), "PYTHONDONTWRITEBYTECODE": ""}
        status = subprocess.run(command, cwd=ROOT, env=env).returncode
        wall = time.monotonic() - began
        if not junit.exists():
            print(f"pytest wrote no report (exit status {status})")
            return status or 1
        times = durations(junit)
        started = starts(log)

    print(f"\n{len(times)} tests in {wall:.0f} s wall time (pytest exit status {status})")
    print(f"\nTest time by directory, {sum(t for t, _ in times):.0f} s in all (the processes' time added up):")
    for directory, seconds in by_directory(times).most_common():
        print(f"{seconds:8.1f} s  {directory}")
    print(f"\nThe {SLOWEST} slowest files:")
    for file, seconds in by_file(times).most_common(SLOWEST):
        print(f"{seconds:8.1f} s  {file}")
    print(f"\nThe {SLOWEST} slowest tests (setup + call + teardown):")
    for seconds, test in sorted(times, reverse=True)[:SLOWEST]:
        print(f"{seconds:8.1f} s  {test}")
    for kind in ("template", "portal", "chromium"):
        files = started.get(kind, collections.Counter())
        print(f"\n{kind} starts: {sum(files.values())}")
        for file, count in files.most_common():
            print(f"{count:8d}  {file}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
