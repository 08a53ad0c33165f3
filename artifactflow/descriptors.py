"""A process's open file descriptors against its limit.

Every websocket and every request is a socket: at the limit a process can
accept no more, and the kernel resets them before anything is logged. So
each process raises its soft limit as far as it may, and daphne, whose
sockets grow with the tabs people keep open, warns as it nears the limit.
"""

import logging
import os
import resource
import time

logger = logging.getLogger(__name__)

# Warn from this share of the soft limit on...
WARN_SHARE = 0.8
# ...checking at most this often: listing /proc/self/fd took 4 ms with 10,000
# descriptors open, too much for every connection of a busy process.
CHECK_INTERVAL = 5.0
FD_DIRECTORIES = ("/proc/self/fd", "/dev/fd")

_next_check = 0.0


def descriptor_limit_raise() -> None:
    """Raises the soft limit on open files to the hard limit: systemd's
    LimitNOFILE sets both, while a shell's default soft limit (1,024) is
    often far below what the administrator allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit is not one the soft limit may take (Linux caps it at fs.nr_open).
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as error:
            logger.info("Could not raise the open file limit from %s to %s: %s", soft, hard, error)


def _open_count() -> int | None:
    for directory in FD_DIRECTORIES:
        try:
            # Less one: the descriptor that lists the directory.
            return len(os.listdir(directory)) - 1
        except OSError:
            continue
    return None


def descriptors_check() -> None:
    """Logs a warning when the process has WARN_SHARE of its open file limit
    in use; counts at most every CHECK_INTERVAL seconds, so it may be called
    on every connection."""
    global _next_check
    now = time.monotonic()
    if now < _next_check:
        return
    _next_check = now + CHECK_INTERVAL
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    count = _open_count()
    if count is None or soft == resource.RLIM_INFINITY or count < WARN_SHARE * soft:
        return
    logger.warning(
        "%s of this process's %s file descriptors are open: at the limit new connections are refused "
        "unlogged. Raise LimitNOFILE (deploy/systemd) or run more processes.",
        count,
        soft,
    )
