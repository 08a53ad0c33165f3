"""Bounds on code that, before a fix, never returned: the test fails with a
TimeoutError instead of hanging the suite. Only for the main thread, where
pytest runs tests; a signal interrupts pure-Python loops such as a lexer's."""

import signal
import time
from contextlib import contextmanager


@contextmanager
def _interrupted_after(seconds: float, *, timer: int, signum: int, what: str):
    def interrupt(signum, frame):
        raise TimeoutError(f"still running after {seconds} s of {what}")

    previous = signal.signal(signum, interrupt)
    began = time.monotonic()
    # pytest-timeout's own bound on the test, on the wall clock: put back once this one is done.
    outer, _ = signal.setitimer(timer, seconds)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(signum, previous)
        if outer:
            signal.setitimer(timer, max(outer - (time.monotonic() - began), 0.001))


def finishes_within(seconds: float):
    """Wall-clock time: for code that waits (on a socket, a worker)."""
    return _interrupted_after(seconds, timer=signal.ITIMER_REAL, signum=signal.SIGALRM, what="wall-clock time")


def computes_within(seconds: float):
    """The process's CPU time: for code that only computes, whose bound a busy
    machine (the suite's other workers, its browsers) would stretch in wall-clock
    time but not in CPU time."""
    return _interrupted_after(seconds, timer=signal.ITIMER_PROF, signum=signal.SIGPROF, what="CPU time")
