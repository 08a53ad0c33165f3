from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from artifactflow.markdown import code_render, markdown_render, text_render
from artifacts.selectors import MARKDOWN_TYPES

PLAIN_TEXT = "text/plain"

register = template.Library()


@register.filter
def render_artifact(content: str, content_type: str) -> str:
    """Markdown as sanitised HTML, plain text as paragraphs that wrap, code
    highlighted on the server, other text as is."""
    if content_type in MARKDOWN_TYPES:
        return mark_safe(markdown_render(content))
    if content_type == PLAIN_TEXT:
        return mark_safe(text_render(content))
    return mark_safe(code_render(content, content_type=content_type))


_WORD_TAGS = {"del": "del", "add": "ins"}


@register.filter
def render_diff(lines) -> str:
    """Diff lines as one block each (no newlines between them to double the
    spacing), the changed words of a paired line inside <del> or <ins>.
    Built here rather than in a template loop: a diff of a 200 KB artifact
    has thousands of lines. Every piece of text is escaped."""
    html = []
    for line in lines:
        tag = _WORD_TAGS.get(line.kind)
        parts = "".join(
            f"<{tag}>{escape(text)}</{tag}>" if changed and tag else escape(text) for text, changed in line.parts
        )
        sign = f'<span class="diff-sign">{escape(line.sign)}</span>' if line.sign else ""
        html.append(f'<div class="diff-line diff-{escape(line.kind)}">{sign}{parts}</div>')
    return mark_safe("".join(html))


@register.filter
def prose_paragraphs(text: str) -> str:
    """Text read out of a PDF as the paragraphs it reads as: blank lines part
    them, and a PDF's line breaks inside one are spaces."""
    return mark_safe(text_render(text, lines_joined=True))
