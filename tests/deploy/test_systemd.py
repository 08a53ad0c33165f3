"""The shipped systemd units, read as systemd reads them."""

from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"


def _service_settings(unit: Path) -> dict[str, list[str]]:
    """The [Service] section's settings, each with every value it is given, in order."""
    values: dict[str, list[str]] = {}
    section = None
    for line in unit.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    return values


@pytest.mark.parametrize("unit", ["artifactflow-web@.service", "artifactflow-worker@.service"])
def test_each_process_may_open_tens_of_thousands_of_files(unit):
    # At the default 1,024 a daphne reset new sockets past about 950 tabs, unlogged.
    limits = _service_settings(UNITS / unit).get("LimitNOFILE")
    assert limits is not None, f"{unit} sets no LimitNOFILE"
    # One value, soft and hard alike ("soft:hard" would leave the soft limit to the process).
    [limit] = limits
    assert limit.isdecimal() and int(limit) >= 65536
