"""Markdown from users and models, rendered to HTML that is safe to show
(whole, or block by block as an answer streams); other text highlighted by
its type; and markdown parsed into tokens for whoever reads its structure.
"""

import re
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from html import unescape
from urllib.parse import urlencode, urlsplit

import nh3
import pygments
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from mdit_py_plugins.tasklists import tasklists_plugin
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import LEXERS, find_lexer_class

from artifactflow.citations import citations_read
from artifactflow.textsearch import CJK_CHARACTER, words_comparable_span

# Every render is bounded: past this many characters text is shown plain, and a
# render still going after this many seconds stops and shows its text plain.
# markdown-it is quadratic on some inputs (100,000 "[" take seconds) and a
# lexer can loop for ever (mcschema on "<!--"): no content may hold a thread.
RENDER_MAX_CHARS = 2_000_000
RENDER_SECONDS = 2.0

# The lexers used, by class name: the languages people write in and the file
# types they upload. Pygments ships some 600 lexers, a few of which never end
# on some inputs; a language outside this list is shown as plain text. A lexer
# joins only if tests/artifactflow/test_markdown.py's backtracking shapes pass:
# a regular expression that backtracks for ever cannot be stopped from the
# thread running it (Scala and reStructuredText, on a run of backslashes, are
# left out for that).
HIGHLIGHTED_LEXERS = frozenset(
    """
    ApacheConfLexer BashLexer BashSessionLexer BatchLexer CLexer CMakeLexer CSharpLexer ClojureLexer CppLexer
    CssLexer CythonLexer DartLexer DiffLexer DjangoLexer DockerLexer ElixirLexer ErlangLexer FSharpLexer
    FortranLexer GoLexer GraphQLLexer GroovyLexer HaskellLexer HtmlDjangoLexer HtmlLexer HttpLexer IniLexer
    JavaLexer JavascriptLexer JsonLdLexer JsonLexer JsxLexer JuliaLexer KotlinLexer LessCssLexer LuaLexer
    MakefileLexer MarkdownLexer MatlabLexer MySqlLexer NginxConfLexer ObjectiveCLexer PerlLexer PhpLexer
    PostgresLexer PowerShellLexer PropertiesLexer ProtoBufLexer PythonConsoleLexer PythonLexer
    PythonTracebackLexer RubyLexer RustLexer SLexer SassLexer ScssLexer SqlLexer SqliteConsoleLexer SwiftLexer
    TOMLLexer TerraformLexer TexLexer TextLexer TsxLexer TypeScriptLexer VueLexer XmlLexer YamlLexer ZigLexer
    """.split()
)
# Pygments' own index gives each lexer's names and media types without
# importing the lexers themselves.
_by_alias = {alias: LEXERS[name][1] for name in HIGHLIGHTED_LEXERS for alias in LEXERS[name][2]}
_by_mimetype = {mimetype.lower(): LEXERS[name][1] for name in HIGHLIGHTED_LEXERS for mimetype in LEXERS[name][4]}


class RenderTimeout(Exception):
    """A render went on past its time."""


_deadline: ContextVar[float] = ContextVar("render_deadline", default=float("inf"))
# The renders cut short inside `render_timeouts_noted`: what a busy machine
# showed plain is no rendering to keep.
_timeouts: ContextVar[list | None] = ContextVar("render_timeouts", default=None)


@contextmanager
def render_timeouts_noted():
    """Yields a list that each render running out of time inside adds to."""
    noted = []
    token = _timeouts.set(noted)
    try:
        yield noted
    finally:
        _timeouts.reset(token)


@contextmanager
def _bounded_in_time():
    token = _deadline.set(time.monotonic() + RENDER_SECONDS)
    try:
        yield
    except RenderTimeout:
        if (noted := _timeouts.get()) is not None:
            noted.append(True)
        raise
    finally:
        _deadline.reset(token)


def _deadline_check() -> None:
    if time.monotonic() > _deadline.get():
        raise RenderTimeout


def _lexer(*, alias: str = "", mimetype: str = "") -> Lexer | None:
    """The allowed lexer for a fence's language or a media type, None for any other."""
    name = _by_alias.get(alias.strip().lower()) if alias else _by_mimetype.get(mimetype.split(";")[0].strip().lower())
    return find_lexer_class(name)() if name else None


def _highlight(code: str, lexer: Lexer, formatter: HtmlFormatter) -> str:
    def tokens():
        for token in lexer.get_tokens(code):
            _deadline_check()
            yield token

    # Pygments escapes the source text it formats.
    return pygments.format(tokens(), formatter)


_fence_formatter = HtmlFormatter(nowrap=True)
_file_formatter = HtmlFormatter(cssclass="highlight", nowrap=False)


def _code_highlight(code: str, language: str, attrs) -> str:
    """A fenced block in an allowed language, highlighted on the server;
    anything else is left to markdown-it, which escapes it."""
    lexer = _lexer(alias=language) if language.strip() else None
    if lexer is None:
        return ""
    # Starting with <pre> tells markdown-it to use the block as it is.
    return f'<pre class="highlight"><code>{_highlight(code, lexer, _fence_formatter)}</code></pre>\n'


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
    target = ' target="_blank"' if _leaves_the_site(src) else ""
    return f'<a class="image-link" href="{escapeHtml(src)}"{target}>{label}</a>'


# A document of the team library, as agents cite it (agents.models.LIBRARY_URL_PREFIX).
# library://9#3 is its third passage (library.passages).
_LIBRARY_URL = re.compile(r"library://(\d{1,18})/?(?:#(\d{1,9}))?", re.IGNORECASE)
# One named in running text ("Source: library://9"): not the end of a longer word or address.
_LIBRARY_MENTION = re.compile(r"(?<![\w/.+-])library://\d{1,18}(?:#\d{1,9})?(?![\w])/?", re.IGNORECASE)


def _leaves_the_site(href: str) -> bool:
    """Whether a link leads to another site, to open in a new tab."""
    return href.lower().startswith(("http://", "https://", "//"))


def _library_page(href: str, *, quote: str = "") -> str | None:
    """The page of the library document a library://<id> link names, which
    a browser can open, at the passage a library://<id>#<n> names, with the
    words a citation quotes marked, else the passage (the page marks them:
    library.views); None for any other link."""
    match = _LIBRARY_URL.fullmatch(href)
    if match is None:
        return None
    try:
        page = reverse("library-document", args=[int(match[1])])
    except NoReverseMatch:
        return None
    query = {"at": int(match[2])} if match[2] else {}
    if quote:
        query["passage"] = quote
    return f"{page}?{urlencode(query)}#passage" if query else page


def _link_marked(inside: bool):
    """Renders a link's opening or closing tag, noting for the image rule
    whether what follows is inside a link. A library:// link leads to the
    document's page; a link to another site, and a citation, open in a new
    tab (the sanitiser gives every link rel="noopener noreferrer nofollow")."""

    def rule(renderer, tokens, idx, options, env) -> str:
        env["in_link"] = inside
        token = tokens[idx]
        if inside:
            href = token.attrGet("href") or ""
            page = _library_page(href, quote=token.attrGet("data-quote") or "")
            if page is not None:
                token.attrSet("href", page)
            # A citation opens beside the report it is read in, as a link to another site does.
            if _leaves_the_site(href) or token.markup == "citation":
                token.attrSet("target", "_blank")
        return renderer.renderToken(tokens, idx, options, env)

    return rule


def _library_links(state) -> None:
    """Makes each library://<id> in running text a link (which link_open
    leads to the document's page), as a model's [title](library://<id>) is:
    a report's "Source: library://9" is one a reader can open. Code, and the
    text of a link already, are left as they are."""
    for block in state.tokens:
        if block.type != "inline" or not block.children or "library://" not in block.content.lower():
            continue
        children, depth = [], 0
        for token in block.children:
            depth += {"link_open": 1, "link_close": -1}.get(token.type, 0)
            if token.type != "text" or depth or not _LIBRARY_MENTION.search(token.content):
                children.append(token)
                continue
            at = 0
            for mention in _LIBRARY_MENTION.finditer(token.content):
                if mention.start() > at:
                    children.append(_text_token(token.content[at : mention.start()], level=token.level))
                link = Token("link_open", "a", 1, attrs={"href": mention[0]}, level=token.level, markup="autolink")
                children += [
                    link,
                    _text_token(mention[0], level=token.level + 1),
                    Token("link_close", "a", -1, level=token.level, markup="autolink"),
                ]
                at = mention.end()
            if at < len(token.content):
                children.append(_text_token(token.content[at:], level=token.level))
        block.children = children


def _citation_links(state) -> None:
    """Makes each numbered marker ([1]) that names a reference of the text a
    link to its source (artifactflow.citations), titled with the source's
    name and carrying the quotation it follows, for the source's page to
    mark: a library passage's page marks it itself (link_open), a web page's
    snapshot through static/js/sources.js. The list of sources keeps a line
    for each."""
    found = citations_read(state.tokens)
    # A list of sources written a line each reads as one: each on a line of its own.
    for block in found.reference_blocks:
        for child in state.tokens[block].children:
            if child.type == "softbreak":
                child.type, child.tag = "hardbreak", "br"
    by_child: dict[tuple[int, int], list] = {}
    for marker in found.markers:
        by_child.setdefault((marker.block, marker.child), []).append(marker)
    # Last first, so that replacing a child leaves the places of those before it.
    for (block, child), markers in sorted(by_child.items(), reverse=True):
        token = state.tokens[block].children[child]
        pieces, at = [], 0
        for marker in markers:
            pieces.append(_text_token(token.content[at : marker.start], level=token.level))
            for number in marker.numbers:
                reference = found.references[number]
                attrs = {"href": reference.href, "class": "citation", "title": reference.title}
                if marker.quote:
                    attrs["data-quote"] = marker.quote
                pieces += [
                    Token("link_open", "a", 1, attrs=attrs, level=token.level, markup="citation"),
                    _text_token(f"[{number}]", level=token.level + 1),
                    Token("link_close", "a", -1, level=token.level, markup="citation"),
                ]
            at = marker.end
        pieces.append(_text_token(token.content[at:], level=token.level))
        state.tokens[block].children[child : child + 1] = [
            piece for piece in pieces if piece.type != "text" or piece.content
        ]


def _text_token(content: str, *, level: int) -> Token:
    return Token("text", "", 0, content=content, level=level)


def _deadline_rules(md: MarkdownIt) -> None:
    """Checks the render's time at every block and at every inline position
    (the quadratic cases rescan inline text, through these same rules);
    neither rule ever matches."""

    def block_rule(state, start_line, end_line, silent) -> bool:
        _deadline_check()
        return False

    def inline_rule(state, silent) -> bool:
        _deadline_check()
        return False

    md.block.ruler.before("table", "deadline", block_rule)
    md.inline.ruler.before("text", "deadline", inline_rule)


# js-default turns raw HTML off and refuses javascript:/data: links; nh3
# sanitises the output again, so a renderer bug cannot reach the page.
# The task list plugin draws "- [ ]" / "- [x]" items (task_plan) as checkboxes.
_md = (
    MarkdownIt("js-default", {"highlight": _code_highlight})
    .enable("table")
    .enable("strikethrough")
    .use(tasklists_plugin)
    .use(_deadline_rules)
)
_md.core.ruler.push("library_links", _library_links)
_md.core.ruler.push("citation_links", _citation_links)
_md.add_render_rule("image", _image_as_link)
_md.add_render_rule("link_open", _link_marked(True))
_md.add_render_rule("link_close", _link_marked(False))
# Raw HTML never gets through markdown-it, so classes and inputs can only come
# from the highlighter, the task list plugin and the image links; no <img>.
_tags = (nh3.ALLOWED_TAGS | {"input"}) - {"img"}
_attributes = {
    **nh3.ALLOWED_ATTRIBUTES,
    "a": {"href", "hreflang", "class", "target", "title", "data-quote"},
    "pre": {"class"},
    "span": {"class"},
    "ul": {"class"},
    "li": {"class"},
    "input": {"class", "checked"},
}
# Whatever reaches the page as an input is a box nobody can tick.
_forced = {"input": {"type": "checkbox", "disabled": "disabled"}}
_LINK_REL = "noopener noreferrer nofollow"


def _clean(html: str, *, tags=_tags, attributes=_attributes) -> str:
    return nh3.clean(html, tags=tags, attributes=attributes, set_tag_attribute_values=_forced, link_rel=_LINK_REL)


def markdown_render(text: str) -> str:
    """Sanitised HTML; text too long, or too slow, to format is shown plain."""
    if len(text) <= RENDER_MAX_CHARS:
        try:
            with _bounded_in_time():
                html = _md.render(text)
        except RenderTimeout:
            pass
        else:
            return _clean(html)
    return format_html(
        '<p class="meta">Too long to format: shown as plain text.</p><pre class="unformatted">{}</pre>', text
    )


def code_render(code: str, *, content_type: str) -> str:
    """A whole text file as HTML: highlighted when its type is one of the
    allowed lexers' and that is quick enough, else plain."""
    lexer = _lexer(mimetype=content_type) if len(code) <= RENDER_MAX_CHARS else None
    if lexer is not None:
        try:
            with _bounded_in_time():
                return _highlight(code, lexer, _file_formatter)
        except RenderTimeout:
            pass
    return format_html('<pre class="plain">{}</pre>', code)


_BLANK_LINES = re.compile(r"\n\s*\n")


def text_render(text: str, *, lines_joined: bool = False) -> str:
    """Plain text as the prose it is: paragraphs (parted by blank lines) that
    wrap at the page's edge, each line break kept (CSS: .plain-lines), or with
    `lines_joined` made spaces (a PDF's text breaks its lines where its page
    did). Not a <pre>: a note is no code, to run off the right edge under a
    Copy code button. Each library://<id> is a link to the document's page,
    as in markdown. Every piece of text is escaped."""
    paragraphs = (" ".join(part.split()) if lines_joined else part.strip("\n") for part in _BLANK_LINES.split(text))
    html = "".join(format_html("<p>{}</p>", paragraph) for paragraph in paragraphs if paragraph.strip())
    # library:// and digits are the same escaped: the mentions are found in the escaped text.
    html = _LIBRARY_MENTION.sub(
        lambda mention: format_html('<a href="{}">{}</a>', _library_page(mention[0]) or "", mention[0]), html
    )
    return _clean(
        f'<div class="prose-text{"" if lines_joined else " plain-lines"}">{html}</div>',
        attributes={**_attributes, "div": {"class"}},
    )


# Parsers for markdown's structure rather than its look (the Word export, the
# artifact list's previews): raw HTML stays in html tokens, for the reader to
# leave out or write as text. With the task list plugin a "- [ ]" item's box is
# an html_inline token; without it, the "[ ]" is the item's text.
_structure_md = MarkdownIt("commonmark").enable("table").enable("strikethrough").use(_deadline_rules)
_structure_task_md = (
    MarkdownIt("commonmark").enable("table").enable("strikethrough").use(tasklists_plugin).use(_deadline_rules)
)
# Paragraphs of text and nothing else, read in linear time: the structure of
# text too long, or too slow, to parse.
_paragraphs_md = MarkdownIt("zero")


def markdown_tokens(text: str, *, task_lists: bool = False) -> list[Token]:
    if len(text) <= RENDER_MAX_CHARS:
        try:
            with _bounded_in_time():
                return (_structure_task_md if task_lists else _structure_md).parse(text)
        except RenderTimeout:
            pass
    return _paragraphs_md.parse(text)


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


# --- marking a passage in rendered HTML -----------------------------------------------
# A tag, or the text between two: the renderer's and the sanitiser's output
# quote every attribute and encode the characters of a URL.
_TAG_OR_TEXT = re.compile(r"(<[^>]*>)")
# Where a snippet leaves text out.
_PASSAGE_GAP = re.compile(r"…|\.\.\.")
# Markdown's syntax in a passage quoted from a document's source, which its
# rendered text has not: a link's target, emphasis and code marks, heading
# and quote marks, a link's brackets.
_MARKDOWN_SYNTAX = re.compile(r"\]\([^)]*\)|[*`~\[\]]+|(?<!\w)_+|_+(?!\w)|(?:^|(?<=\s))[#>]+(?=\s)")
_PASSAGE_PIECE_MIN_CHARS = 4


def _passage_pieces(passage: str) -> list[str]:
    """What to look for, longest first: each fragment of the passage without
    its markdown syntax, then the runs of words between that syntax."""
    fragments = [" ".join(_MARKDOWN_SYNTAX.sub("", fragment).split()) for fragment in _PASSAGE_GAP.split(passage)]
    runs = [
        " ".join(run.split()) for fragment in _PASSAGE_GAP.split(passage) for run in _MARKDOWN_SYNTAX.split(fragment)
    ]
    pieces = sorted(set(fragments), key=len, reverse=True) + sorted(set(runs) - set(fragments), key=len, reverse=True)
    return [
        piece
        for piece in pieces
        if len(piece) >= _PASSAGE_PIECE_MIN_CHARS or (len(piece) > 1 and CJK_CHARACTER.search(piece))
    ]


def _passage_whole(passage: str) -> str:
    """The passage as one piece, when it leaves nothing out."""
    return " ".join(_MARKDOWN_SYNTAX.sub("", passage).split()) if not _PASSAGE_GAP.search(passage) else ""


def passage_mark(html: str, passage: str) -> tuple[str, bool]:
    """Sanitised HTML with the first place its text shows the passage (or
    the longest piece of it that it shows) marked, the first mark with
    id="passage" for a link's #passage to scroll to; and whether it was
    found. A whole passage (no gap in it) is found too where only its
    punctuation, spaces or full-width forms differ, as the citation check
    compares a quotation. The passage may run across inline tags (emphasis, a link): each
    run of text in it is marked. The result is sanitised again, so the
    passage can add nothing but the marks."""
    segments = _TAG_OR_TEXT.split(html)
    # The text of the HTML, and where each of its runs of text starts in it.
    texts = {index: unescape(segment) for index, segment in enumerate(segments) if index % 2 == 0}
    starts, text = {}, ""
    for index, segment in texts.items():
        starts[index] = len(text)
        text += segment
    for piece in _passage_pieces(passage):
        pattern = re.compile(r"\s+".join(re.escape(word) for word in piece.split()), re.IGNORECASE)
        found = pattern.search(text)
        span = found.span() if found else None
        if span is None and piece == _passage_whole(passage):
            # A quotation spelt otherwise (its punctuation, spaces, full-width
            # forms), as the citation check finds it.
            span = words_comparable_span(text, piece)
        if span is None:
            continue
        first = True
        for index, segment in texts.items():
            begin = max(span[0] - starts[index], 0)
            end = min(span[1] - starts[index], len(segment))
            if begin >= end or not segment[begin:end].strip():
                continue
            mark = '<mark id="passage">{}</mark>' if first else "<mark>{}</mark>"
            segments[index] = format_html("{}" + mark + "{}", segment[:begin], segment[begin:end], segment[end:])
            first = False
        marked = _clean(
            "".join(segments), tags=_tags | {"mark"}, attributes={**_attributes, "mark": {"id"}, "div": {"class"}}
        )
        return marked, True
    return html, False
