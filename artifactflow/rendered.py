"""Text rendered once: HTML kept in the cache under a digest of what it was
rendered from, so the first view renders it and every later one, anyone's,
reads it back. Nothing needs invalidating: other text is another key. An
answer (agents.thread) and a page of an artifact (artifacts.rendering) are
kept here; the database holds only their text."""

import hashlib
import logging
from collections.abc import Callable

from django.core.cache import cache
from django.utils.safestring import SafeString, mark_safe

from .cache import BestEffortCache
from .markdown import markdown_render, render_timeouts_noted

logger = logging.getLogger(__name__)

# Part of every key: raise it when a renderer's HTML changes, so that nothing
# rendered the old way is shown again.
RENDERING = 2
# What nobody viewed for a month is rendered again when someone does.
KEEP_SECONDS = 30 * 24 * 3600

_cache = BestEffortCache(
    logger=logger,
    failed="The cache of rendered text failed; text is rendered at each view until it is back",
    back="The cache of rendered text is back",
)


def answer_html(text: str) -> SafeString:
    """A finished answer as the thread shows it."""
    return html_kept(text=text, kind="answer", render=markdown_render)


def rendered_key(*, text: str, kind: str) -> str:
    digest = hashlib.blake2b(f"{kind}\0{text}".encode(), digest_size=20).hexdigest()
    return f"rendered:{RENDERING}:{digest}"


def html_kept(*, text: str, kind: str, render: Callable[[str], str]) -> SafeString:
    """`render(text)`, read from the cache when it is there and put there
    when it is not. `kind` names the renderer and its options, which the key
    holds with the text. A render a busy machine cut short (shown plain) is
    not kept; while the cache is down every call renders."""
    key = rendered_key(text=text, kind=kind)
    ok, html = _cache.call(cache.get, key)
    if ok and html is not None:
        return mark_safe(html)
    with render_timeouts_noted() as timeouts:
        html = render(text)
    if ok and not timeouts:
        _cache.call(cache.set, key, str(html), KEEP_SECONDS)
    return mark_safe(html)
