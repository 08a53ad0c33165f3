"""Markdown from users and models, rendered to HTML that is safe to show."""

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

_formatter = HtmlFormatter(nowrap=True)


def _code_highlight(code: str, language: str, attrs) -> str:
    """A fenced block in a language Pygments knows, highlighted on the server;
    anything else is left to markdown-it, which escapes it."""
    try:
        lexer = get_lexer_by_name(language.strip()) if language.strip() else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""
    # Pygments escapes the source text it formats. Starting with <pre> tells
    # markdown-it to use the block as it is.
    return f'<pre class="highlight"><code>{highlight(code, lexer, _formatter)}</code></pre>\n'


# js-default turns raw HTML off and refuses javascript:/data: links; nh3
# sanitises the output again, so a renderer bug cannot reach the page.
_md = MarkdownIt("js-default", {"highlight": _code_highlight}).enable("table").enable("strikethrough")
# Raw HTML never gets through markdown-it, so classes can only come from the
# highlighter; they are what the highlight stylesheet colours.
_attributes = {**nh3.ALLOWED_ATTRIBUTES, "pre": {"class"}, "span": {"class"}}


def markdown_render(text: str) -> str:
    return nh3.clean(_md.render(text), attributes=_attributes, link_rel="noopener noreferrer nofollow")
