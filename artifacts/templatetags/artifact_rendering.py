from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_for_mimetype
from pygments.util import ClassNotFound

from conversations.markdown import markdown_render

register = template.Library()

_formatter = HtmlFormatter(cssclass="highlight", nowrap=False)


@register.filter
def render_artifact(content: str, content_type: str) -> str:
    """Markdown as sanitised HTML, code highlighted on the server, other text as is."""
    if content_type in ("text/markdown", "text/x-markdown"):
        return mark_safe(markdown_render(content))
    try:
        lexer = get_lexer_for_mimetype(content_type)
    except ClassNotFound:
        return format_html('<pre class="plain">{}</pre>', content)
    # Pygments escapes the source text it formats.
    return mark_safe(highlight(content, lexer, _formatter))
