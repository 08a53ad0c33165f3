"""A bound on code that, before a fix, never returned: the test fails with a
TimeoutError instead of hanging the suite. Only for the main thread, where
pytest runs tests; a signal interrupts pure-Python loops such as a lexer's."""

import signal
from contextlib import contextmanager


@contextmanager
def finishes_within(seconds: float):
    def interrupt(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
