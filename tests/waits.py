"""How long a test waits for a state before it fails: a base time scaled by
one factor, TEST_TIMEOUT_SCALE, so a busy machine gets longer waits everywhere
at once rather than failing the first wait that runs out.

Unset, the factor comes from the machine's load when the suite starts (1 when
idle, 2 with one busy process per core, at most 4) and is put in the
environment, so the xdist workers and the portals they start use the same one.
"""

import asyncio
import os
import time

MOST = 4.0


def _from_load() -> float:
    return min(MOST, 1 + os.getloadavg()[0] / (os.cpu_count() or 1))


SCALE = float(os.environ.setdefault("TEST_TIMEOUT_SCALE", f"{_from_load():.2f}"))


def seconds(base: float) -> float:
    """`base` seconds, scaled."""
    return base * SCALE


def ms(base: float) -> int:
    """`base` seconds, scaled, in milliseconds (Playwright's unit)."""
    return round(base * SCALE * 1000)


def until(condition, *, timeout: float, interval: float = 0.02) -> None:
    """Returns once `condition()` is true; fails after `timeout` seconds, scaled."""
    deadline = time.monotonic() + seconds(timeout)
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {seconds(timeout):.1f} s"
        time.sleep(interval)


async def until_async(condition, *, timeout: float, interval: float = 0.01) -> None:
    """`until` for a test running in the event loop, which the wait must not block."""
    deadline = time.monotonic() + seconds(timeout)
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {seconds(timeout):.1f} s"
        await asyncio.sleep(interval)
