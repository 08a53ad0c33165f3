"""Calls to the cache that a page or a turn can do without. The cache is
best-effort and the database stays the truth: while it fails (Redis gone, a
file cache's disk full) the caller goes on without it, and the outage is
logged when it starts and when it ends rather than at every call."""

import logging


class BestEffortCache:
    """One use of the cache, with the words its log says an outage in."""

    def __init__(self, *, logger: logging.Logger, failed: str, back: str):
        self._logger, self._failed, self._back = logger, failed, back
        # Per process, unlocked: two threads racing here at worst log a line twice.
        self.down = False

    def call(self, call, *args, **kwargs) -> tuple[bool, object]:
        """(True, what `call` returned), or (False, None) when the cache failed."""
        try:
            result = call(*args, **kwargs)
        # Any exception, not a list of Redis's: what a cache backend raises
        # depends on the backend (redis-py's errors, OSError from the file
        # cache, whatever a later backend has), and none of them may break a
        # turn's step or a page over what the database makes up for.
        except Exception:
            if not self.down:
                self._logger.warning(self._failed, exc_info=True)
            self.down = True
            return False, None
        if self.down:
            self._logger.warning(self._back)
            self.down = False
        return True, result
