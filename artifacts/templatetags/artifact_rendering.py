import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from artifactflow.markdown import code_render, markdown_render
from artifacts.selectors import MARKDOWN_TYPES

register = template.Library()


@register.filter
def render_artifact(content: str, content_type: str) -> str:
    """Markdown as sanitised HTML, code highlighted on the server, other text as is."""
    if content_type in MARKDOWN_TYPES:
        return mark_safe(markdown_render(content))
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


_BLANK_LINES = re.compile(r"\n\s*\n")


@register.filter
def prose_paragraphs(text: str) -> str:
    """Text read out of a PDF as the paragraphs it reads as: blank lines part
    them, and a PDF's line breaks inside one are spaces. Every piece is escaped."""
    paragraphs = (" ".join(part.split()) for part in _BLANK_LINES.split(text))
    return mark_safe('<div class="prose-text">' + "".join(f"<p>{escape(p)}</p>" for p in paragraphs if p) + "</div>")
