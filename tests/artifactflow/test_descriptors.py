import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess:
    # A process of its own: the test process's limit and open files stay as they are.
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_a_process_nearing_its_open_file_limit_warns_once_per_interval():
    result = _python(
        """
        import logging, os, resource
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
        from artifactflow import descriptors

        resource.setrlimit(resource.RLIMIT_NOFILE, (100, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        files = []
        descriptors.descriptors_check()
        files += [os.open(os.devnull, os.O_RDONLY) for _ in range(90 - len(os.listdir("/proc/self/fd")))]
        descriptors._next_check = 0.0
        descriptors.descriptors_check()
        descriptors.descriptors_check()
        """
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING artifactflow.descriptors")]
    # Silent at a handful of files; once at 90 of 100, however often it is asked within the interval.
    assert len(warnings) == 1, result.stderr
    assert "of this process's 100 file descriptors are open" in warnings[0]
    assert "LimitNOFILE" in warnings[0]


def test_a_process_raises_its_soft_open_file_limit_to_the_hard_one():
    result = _python(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))
        from artifactflow import descriptors

        descriptors.descriptor_limit_raise()
        print(*resource.getrlimit(resource.RLIMIT_NOFILE))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["512", "512"]


def test_every_django_process_starts_at_its_hard_open_file_limit():
    # As a shell with `ulimit -Sn 512` would start daphne or a worker: Django's setup raises it.
    code = "import django, resource; django.setup(); print(*resource.getrlimit(resource.RLIMIT_NOFILE))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, 1024)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1024", "1024"]
