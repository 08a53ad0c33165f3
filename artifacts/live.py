"""Working copies of running turns' artifacts, shared through the cache so
that every web process can show what a worker has not flushed yet.

The cache is best-effort: the database stays the truth. While the cache is
down (Redis gone) a turn's tools go on, pages show the saved versions, and
the worker publishes its working copies again once it is back
(`ArtifactManager.live_republish`)."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from artifactflow import realtime
from artifactflow.cache import BestEffortCache

logger = logging.getLogger(__name__)

_cache = BestEffortCache(
    logger=logger,
    failed="The live artifact cache failed; pages show saved versions until it is back",
    back="The live artifact cache is back",
)


@dataclass(frozen=True)
class ActiveRun:
    """A turn in progress in the session, as the agents app (above this one)
    reports it (agents.selectors.session_active_runs)."""

    run_id: int
    # The message the turn answers: its working copies are on the branches through it.
    message_id: int
    # The artifacts its checkpoint carries unsaved.
    writing: tuple[str, ...]


def _key(*, session_id, run_id) -> str:
    return f"artifacts-live:{session_id}:{run_id}"


def live_put(*, session_id, run_id: int | None, artifacts: list[dict]) -> bool:
    """Publish a run's working copies. False when the cache failed: the caller
    publishes them again later (pages meanwhile show the saved versions)."""
    if run_id is None:
        return True
    ok, _ = _cache.call(
        cache.set,
        _key(session_id=session_id, run_id=run_id),
        {a["artifact_id"]: a for a in artifacts},
        # A turn waiting for permission keeps its working copies unsaved (its
        # checkpoint holds them) and the page shows them all the while.
        timeout=max(settings.RUN_TIME_LIMIT, settings.PERMISSION_TIMEOUT) + 300,
    )
    return ok


def live_clear(*, session_id, run_id: int | None) -> None:
    # A key left behind by a failure does no harm: `live_get` ignores the
    # entries of runs that are not active, and the key expires.
    if run_id is not None:
        _cache.call(cache.delete, _key(session_id=session_id, run_id=run_id))


def live_get(*, session_id, path: tuple[int, ...], runs: Iterable[ActiveRun]) -> dict[str, dict]:
    """The unflushed working copies of the session's active `runs` on the
    branch `path` (the message ids root → leaf), by artifact id. A run that
    ended (or whose worker died) is not among them and contributes nothing,
    whatever the cache holds. Nothing while the cache is down."""
    run_ids = sorted(run.run_id for run in runs if run.message_id in path)
    if not run_ids:
        return {}
    keys = [_key(session_id=session_id, run_id=run_id) for run_id in run_ids]
    ok, entries = _cache.call(cache.get_many, keys)
    if not ok:
        return {}
    merged = {}
    for key in keys:
        merged.update(entries.get(key, {}))
    return merged


def live_writing(*, session_id, runs: Iterable[ActiveRun]) -> set[str]:
    """The ids of the artifacts the session's active `runs` have changed and
    not saved: what the cache shows, and what their checkpoints carry, in case
    the cache is down or the run waits on the user past the cache's memory."""
    runs = list(runs)
    ids = {artifact_id for run in runs for artifact_id in run.writing}
    if runs:
        keys = [_key(session_id=session_id, run_id=run.run_id) for run in runs]
        ok, entries = _cache.call(cache.get_many, keys)
        if ok:
            ids.update(artifact_id for working in entries.values() for artifact_id in working)
    return ids


def live_announce(*, session_id) -> None:
    """Tell the conversation's open pages that its artifacts changed, once committed."""
    realtime.event_send_on_commit(conversation_id=session_id, type=realtime.ARTIFACTS_CHANGED)
