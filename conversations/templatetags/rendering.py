from django import template
from django.utils.safestring import mark_safe

from artifactflow.markdown import markdown_render

register = template.Library()


@register.filter
def markdown(text: str) -> str:
    return mark_safe(markdown_render(text or ""))
