"""Markdown from users and models, rendered to HTML that is safe to show
(whole, or block by block as an answer streams); other text highlighted by
its type; and markdown parsed into tokens for whoever reads its structure.
"""

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import nh3
from django.utils.html import format_html
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from mdit_py_plugins.tasklists import tasklists_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name, get_lexer_for_mimetype
from pygments.util import ClassNotFound

_fence_formatter = HtmlFormatter(nowrap=True)
_file_formatter = HtmlFormatter(cssclass="highlight", nowrap=False)


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
    return f'<pre class="highlight"><code>{highlight(code, lexer, _fence_formatter)}</code></pre>\n'


def _image_as_link(renderer, tokens, idx, options, env) -> str:
    """An image becomes a link to it: a page never loads an image a model
    chose, whose address could carry the conversation to another host (the
    Content-Security-Policy would block it too). The user may click."""
    token = tokens[idx]
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    src = token.attrGet("src") or ""
    host = urlsplit(src).hostname
    label = escapeHtml(("Image: " + alt if alt else "Image") + (f" ({host})" if host else ""))
    # A badge inside a link stays that link's text: links cannot nest.
    if env.get("in_link"):
        return label
    return f'<a class="image-link" href="{escapeHtml(src)}">{label}</a>'


def _link_marked(inside: bool):
    """Renders a link's opening or closing tag as usual, noting for the image
    rule whether what follows is inside a link."""

    def rule(renderer, tokens, idx, options, env) -> str:
        env["in_link"] = inside
        return renderer.renderToken(tokens, idx, options, env)

    return rule


# js-default turns raw HTML off and refuses javascript:/data: links; nh3
# sanitises the output again, so a renderer bug cannot reach the page.
# The task list plugin draws "- [ ]" / "- [x]" items (task_plan) as checkboxes.
_md = (
    MarkdownIt("js-default", {"highlight": _code_highlight})
    .enable("table")
    .enable("strikethrough")
    .use(tasklists_plugin)
)
_md.add_render_rule("image", _image_as_link)
_md.add_render_rule("link_open", _link_marked(True))
_md.add_render_rule("link_close", _link_marked(False))
# Raw HTML never gets through markdown-it, so classes and inputs can only come
# from the highlighter, the task list plugin and the image links; no <img>.
_tags = (nh3.ALLOWED_TAGS | {"input"}) - {"img"}
_attributes = {
    **nh3.ALLOWED_ATTRIBUTES,
    "a": {"href", "hreflang", "class"},
    "pre": {"class"},
    "span": {"class"},
    "ul": {"class"},
    "li": {"class"},
    "input": {"class", "checked"},
}
# Whatever reaches the page as an input is a box nobody can tick.
_forced = {"input": {"type": "checkbox", "disabled": "disabled"}}


def markdown_render(text: str) -> str:
    return nh3.clean(
        _md.render(text),
        tags=_tags,
        attributes=_attributes,
        set_tag_attribute_values=_forced,
        link_rel="noopener noreferrer nofollow",
    )


def code_render(code: str, *, content_type: str) -> str:
    """A whole text file as HTML: highlighted when Pygments knows its type, else plain."""
    try:
        lexer = get_lexer_for_mimetype(content_type)
    except ClassNotFound:
        return format_html('<pre class="plain">{}</pre>', code)
    # Pygments escapes the source text it formats.
    return highlight(code, lexer, _file_formatter)


# Parsers for markdown's structure rather than its look (the Word export, the
# artifact list's previews): raw HTML stays in html tokens, for the reader to
# leave out or write as text. With the task list plugin a "- [ ]" item's box is
# an html_inline token; without it, the "[ ]" is the item's text.
_structure_md = MarkdownIt("commonmark").enable("table").enable("strikethrough")
_structure_task_md = MarkdownIt("commonmark").enable("table").enable("strikethrough").use(tasklists_plugin)


def markdown_tokens(text: str, *, task_lists: bool = False) -> list[Token]:
    return (_structure_task_md if task_lists else _structure_md).parse(text)


# An opening or closing code fence: up to three spaces, then ``` or ~~~ or longer.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass
class BlockSplitter:
    """Where the finished blocks of streamed markdown end: after the last blank
    line outside a fenced code block. Each line is scanned once, however often
    the text grows. Blocks rendered one by one can differ slightly from the
    whole text rendered at once (a loose list becomes several); the snapshot at
    the end of the run is rendered whole."""

    done: int = 0
    _scanned: int = 0
    _fence: str = ""

    def advance(self, text: str) -> int:
        """The length of the finished blocks of `text`, which extends the text seen before."""
        while (end := text.find("\n", self._scanned)) >= 0:
            line = text[self._scanned : end]
            self._scanned = end + 1
            fence = _FENCE.match(line)
            if self._fence:
                closes = fence and fence[1][0] == self._fence[0] and len(fence[1]) >= len(self._fence)
                if closes and not line[fence.end() :].strip():
                    self._fence = ""
            elif fence:
                self._fence = fence[1]
            elif not line.strip():
                self.done = self._scanned
        return self.done


@dataclass(frozen=True)
class LiveAnswer:
    """An unfinished answer as the page shows it: finished blocks as HTML, the
    block being written as plain text, and the splitter that told them apart,
    to go on from as the text grows."""

    html: str
    tail: str
    splitter: BlockSplitter


def live_answer(text: str) -> LiveAnswer:
    splitter = BlockSplitter()
    done = splitter.advance(text)
    return LiveAnswer(html=markdown_render(text[:done]), tail=text[done:], splitter=splitter)
