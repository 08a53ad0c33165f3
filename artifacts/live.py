"""Working copies of running turns' artifacts, shared through the cache so
that every web process can show what a worker has not flushed yet."""

from django.conf import settings
from django.core.cache import cache

from agents.models import Run
from artifactflow import realtime


def _key(*, session_id, run_id) -> str:
    return f"artifacts-live:{session_id}:{run_id}"


def live_put(*, session_id, run_id: int | None, artifacts: list[dict]) -> None:
    if run_id is None:
        return
    cache.set(
        _key(session_id=session_id, run_id=run_id),
        {a["artifact_id"]: a for a in artifacts},
        timeout=settings.RUN_TIME_LIMIT + 300,
    )


def live_clear(*, session_id, run_id: int | None) -> None:
    if run_id is not None:
        cache.delete(_key(session_id=session_id, run_id=run_id))


def live_get(*, session_id) -> dict[str, dict]:
    """The unflushed working copies of the session's active runs, by artifact id.
    A run that ended (or whose worker died) contributes nothing, whatever the cache holds."""
    run_ids = sorted(
        Run.objects.filter(message__conversation_id=session_id, status__in=Run.ACTIVE_STATUSES).values_list(
            "pk", flat=True
        )
    )
    if not run_ids:
        return {}
    keys = [_key(session_id=session_id, run_id=run_id) for run_id in run_ids]
    entries = cache.get_many(keys)
    merged = {}
    for key in keys:
        merged.update(entries.get(key, {}))
    return merged


def live_announce(*, session_id) -> None:
    """Tell the conversation's open pages that its artifacts changed, once committed."""
    realtime.event_send_on_commit(conversation_id=session_id, type=realtime.ARTIFACTS_CHANGED)
