from django import template
from django.utils.safestring import mark_safe

from agents.selectors import tools_allowed
from artifactflow.markdown import markdown_render

register = template.Library()


@register.filter
def markdown(text: str) -> str:
    return mark_safe(markdown_render(text or ""))


@register.simple_tag
def branch_allowed_tools(entries) -> list[str]:
    """The tools always allowed on the branch a thread shows."""
    return tools_allowed(messages=[entry.message for entry in entries])
