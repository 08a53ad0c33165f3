"""An artifact's text as the pane shows it, and a page of it rendered once
(artifactflow.rendered): a saved version's page is read back from the cache
at every later view. A running turn's working copy changes at every step and
is rendered each time."""

from django.utils.safestring import SafeString, mark_safe

from artifactflow.markdown import code_render, markdown_render, text_render
from artifactflow.rendered import html_kept

from .paging import TextPage
from .selectors import MARKDOWN_TYPES

PLAIN_TEXT = "text/plain"


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


def page_kind(*, content_type: str, prose: bool) -> str:
    """How a page is rendered, as the cache's key names it."""
    return f"artifact-page:{content_type}:{int(prose)}"


def page_render(*, page: TextPage, content_type: str, prose: bool, saved: bool) -> SafeString:
    """The page's HTML; a `saved` version's rendered once."""
    render = prose_render if prose else lambda text: artifact_render(text, content_type=content_type)
    if not saved:
        return render(page.text)
    return html_kept(text=page.text, kind=page_kind(content_type=content_type, prose=prose), render=render)
