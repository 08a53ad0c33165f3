"""Numbered references, as the lead agent is asked to write them in reports:
a marker [n] (or [1, 3]) after what it supports, right after the quotation
when it quotes its source, and one line per source starting with its number:

    Heat pumps kept homes “at 20 °C down to -15 °C outside” [1].

    ## Sources
    [1] [Heat pump survey 2026](https://survey.example/2026)
    [2] [热泵手册](library://9#3)

A numbered list under a heading named for sources ("1. [Title](url)") is
read the same way. Read here from markdown-it's tokens, so that the page
(artifactflow.markdown: each marker a link to its source, with the quotation
for the source's page to mark), the Word export (footnotes) and the citation
check (each quotation looked up in its source) read them alike.
"""

import re
from dataclasses import dataclass
from html import unescape

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext
from markdown_it.token import Token

# Where a turn's citation check is kept: its message's metadata (agents.services.citations).
CITATIONS_KEY = "citations"
# What the check calls the answer; a report it calls by its artifact id.
ANSWER_WHERE = ""

# [1], [1, 3], [1，3]: a few numbers, never a year or a task box.
MARKER = re.compile(r"\[(\d{1,3}(?:\s*[,，]\s*\d{1,3}){0,9})\]")
_REFERENCE_START = re.compile(r"\s*\[(\d{1,3})\]")
_BARE_URL = re.compile(r"(?:https?|library)://\S+", re.IGNORECASE)
# The heading of a list of sources, in the languages the portal speaks.
_SOURCES_HEADING = re.compile(r"sources?|references?|bibliography|works cited|参考|来源|出处|引用|资料", re.IGNORECASE)
# A quotation right before a marker: in curly, straight or corner quotes, then
# at most some spaces and punctuation (“…,” [1] and “…”。[1] both quote).
_QUOTE_BEFORE = re.compile(r"[“\"「『]([^“”\"「」『』\n]{2,500})[”\"」』][\s,.;:，。；：]*$")
_QUOTE_MAX_CHARS = 500


@dataclass(frozen=True)
class Reference:
    number: int
    href: str
    title: str


@dataclass(frozen=True)
class Marker:
    """A marker in the text: where it is (the inline block's index in the
    tokens, its text child's index, the span in that child's content), the
    references it names, and the quotation it follows ("" for none)."""

    block: int
    child: int
    start: int
    end: int
    numbers: tuple[int, ...]
    quote: str


@dataclass(frozen=True)
class Citations:
    references: dict[int, Reference]
    markers: list[Marker]
    # The inline blocks whose lines define references.
    reference_blocks: frozenset[int] = frozenset()

    def quotes(self) -> list[tuple[str, Reference]]:
        """Each quotation with the source it is attributed to: the first of its marker's."""
        return [(marker.quote, self.references[marker.numbers[0]]) for marker in self.markers if marker.quote]


def citations_read(tokens: list[Token]) -> Citations:
    """The references and the markers that name one, of parsed markdown."""
    references, reference_lines = _references(tokens)
    markers = []
    for index, block in enumerate(tokens):
        if block.type != "inline" or not block.children or not references:
            continue
        skipped = reference_lines.get(index, set())
        depth, line, said = 0, 0, ""
        for position, child in enumerate(block.children):
            depth += {"link_open": 1, "link_close": -1}.get(child.type, 0)
            if child.type in ("softbreak", "hardbreak"):
                line += 1
                said += " "
                continue
            if child.type == "code_inline":
                said += child.content
            if child.type != "text":
                continue
            at = 0
            for found in MARKER.finditer(child.content):
                numbers = tuple(int(number) for number in re.split(r"\s*[,，]\s*", found[1]))
                if depth or line in skipped or not all(number in references for number in numbers):
                    continue
                quote = _QUOTE_BEFORE.search(said + child.content[at : found.start()])
                markers.append(
                    Marker(
                        block=index,
                        child=position,
                        start=found.start(),
                        end=found.end(),
                        numbers=numbers,
                        quote=" ".join(quote[1].split())[:_QUOTE_MAX_CHARS] if quote else "",
                    )
                )
                # What a later marker follows starts after this one.
                said, at = "", found.end()
            said += child.content[at:]
    return Citations(references=references, markers=markers, reference_blocks=frozenset(reference_lines))


def _references(tokens: list[Token]) -> tuple[dict[int, Reference], dict[int, set[int]]]:
    """The references, and the lines of each inline block that define one
    (markers there are the list's numbers, not citations)."""
    references: dict[int, Reference] = {}
    lines: dict[int, set[int]] = {}
    under_sources, item_number = False, None
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            under_sources = _SOURCES_HEADING.search(tokens[index + 1].content or "") is not None
        elif token.type == "list_item_open" and token.markup in (".", ")"):
            item_number = int(token.info) if token.info.isdecimal() else None
        elif token.type == "inline" and token.children:
            for line, children in enumerate(_lines(token.children)):
                if not children:
                    continue
                start = _REFERENCE_START.match(children[0].content) if children[0].type == "text" else None
                number = int(start[1]) if start else None
                if number is None and under_sources and item_number is not None and line == 0:
                    number = item_number
                reference = _reference(number, children, skip=start.end() if start else 0) if number else None
                if reference is not None:
                    references.setdefault(number, reference)
                    lines.setdefault(index, set()).add(line)
            item_number = None
    return references, lines


def _lines(children: list[Token]) -> list[list[Token]]:
    lines: list[list[Token]] = [[]]
    for child in children:
        if child.type in ("softbreak", "hardbreak"):
            lines.append([])
        else:
            lines[-1].append(child)
    return [line for line in lines if line] or [[]]


def _reference(number: int, children: list[Token], *, skip: int) -> Reference | None:
    """The source a reference line names: its first link, else the first address in its text."""
    for position, child in enumerate(children):
        if child.type == "link_open":
            shown = []
            for inner in children[position + 1 :]:
                if inner.type == "link_close":
                    break
                shown.append(inner.content)
            return Reference(number=number, href=str(child.attrGet("href") or ""), title="".join(shown).strip())
    text = "".join(child.content for child in children if child.type == "text")[skip:]
    bare = _BARE_URL.search(text)
    if bare is None:
        return None
    href = bare[0].rstrip(".,;:)）。，")
    return Reference(number=number, href=href, title=text[: bare.start()].strip(" -–—:：") or href)


# A citation link as artifactflow.markdown renders it, after sanitising.
_CITATION_LINK = re.compile(r'<a ([^>]*\bclass="citation"[^>]*)>\[(\d{1,3})\]</a>')
_DATA_QUOTE = re.compile(r'\bdata-quote="([^"]*)"')


def citations_unfound_mark(html: str, *, check: dict | None, where: str) -> SafeString:
    """Rendered text with each citation whose quotation the check did not
    find in its source marked, and a note saying so after it. `where` is the
    text's name in the check (ANSWER_WHERE, or a report's artifact id)."""
    missing = {
        (str(item.get("quote", "")), item.get("number"))
        for item in (check or {}).get("missing", [])
        if item.get("where") == where
    }
    if not missing:
        return mark_safe(html)

    def mark(link: re.Match) -> str:
        quote = _DATA_QUOTE.search(link[1])
        if quote is None or (unescape(quote[1]), int(link[2])) not in missing:
            return link[0]
        attributes = link[1].replace('class="citation"', 'class="citation citation-unfound"', 1)
        return format_html(
            '<a {}>[{}]</a><span class="citation-missing" title="{}">✦ {}</span>',
            mark_safe(attributes),
            link[2],
            gettext("These words are not in the source as the agents read it."),
            gettext("not found in [%(number)s]") % {"number": link[2]},
        )

    return mark_safe(_CITATION_LINK.sub(mark, html))
