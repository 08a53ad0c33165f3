from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from artifacts.rendering import artifact_render

register = template.Library()


@register.filter
def render_artifact(content: str, content_type: str) -> str:
    return artifact_render(content, content_type=content_type)


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
