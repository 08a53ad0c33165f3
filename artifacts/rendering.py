"""An artifact's text as the pane shows it, and a page of it rendered once:
the pane's pages are kept in the cache under a digest of what they render
from (the text, its type, whether it reads as prose), so a page is rendered
the first time anyone opens it and read back on every later view, anyone's.
No key needs invalidating: other text is another key. A running turn's
working copy changes at every step and is rendered each time."""

import hashlib
import logging

from django.core.cache import cache
from django.utils.safestring import SafeString, mark_safe

from artifactflow.cache import BestEffortCache
from artifactflow.markdown import code_render, markdown_render, render_timeouts_noted, text_render

from .paging import TextPage
from .selectors import MARKDOWN_TYPES

logger = logging.getLogger(__name__)

PLAIN_TEXT = "text/plain"
# Part of every key: raise it when a renderer's HTML changes, so that no page
# rendered the old way is shown again.
RENDERING = 1
# A page nobody opened for a month is rendered again when someone does.
KEEP_SECONDS = 30 * 24 * 3600

_cache = BestEffortCache(
    logger=logger,
    failed="The cache of rendered artifact pages failed; pages are rendered at each view until it is back",
    back="The cache of rendered artifact pages is back",
)


def artifact_render(content: str, *, content_type: str) -> SafeString:
    """Markdown as sanitised HTML, plain text as paragraphs that wrap, code
    highlighted on the server, other text as is."""
    if content_type in MARKDOWN_TYPES:
        return mark_safe(markdown_render(content))
    if content_type == PLAIN_TEXT:
        return mark_safe(text_render(content))
    return mark_safe(code_render(content, content_type=content_type))


def prose_render(text: str) -> SafeString:
    """Text read out of a PDF as the paragraphs it reads as: blank lines part
    them, and a PDF's line breaks inside one are spaces."""
    return mark_safe(text_render(text, lines_joined=True))


def _render(text: str, *, content_type: str, prose: bool) -> SafeString:
    return prose_render(text) if prose else artifact_render(text, content_type=content_type)


def page_key(*, text: str, content_type: str, prose: bool) -> str:
    digest = hashlib.blake2b(f"{content_type}\0{int(prose)}\0{text}".encode(), digest_size=20).hexdigest()
    return f"artifact-page:{RENDERING}:{digest}"


def page_render(*, page: TextPage, content_type: str, prose: bool, saved: bool) -> SafeString:
    """The page's HTML; a `saved` version's page from the cache when it is
    there, and put there when it is not. A render a busy machine cut short
    (shown plain) is not kept."""
    if not saved:
        return _render(page.text, content_type=content_type, prose=prose)
    key = page_key(text=page.text, content_type=content_type, prose=prose)
    ok, html = _cache.call(cache.get, key)
    if ok and html is not None:
        return mark_safe(html)
    with render_timeouts_noted() as timeouts:
        html = _render(page.text, content_type=content_type, prose=prose)
    if ok and not timeouts:
        _cache.call(cache.set, key, str(html), KEEP_SECONDS)
    return html
