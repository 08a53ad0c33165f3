"""A library document cut into passages: the pieces search ranks, agents
read and citations open at.

A passage is a few paragraphs under one heading, about PASSAGE_SIZE long,
with where it is in the document: its character offsets, its heading path
(the headings above it, outermost first), and its page in a text whose pages are parted
by form feeds.
Headings start a new passage, so a passage never mixes two sections; a
paragraph longer than PASSAGE_MAX_SIZE is cut at its sentences' ends. The
cut is one pass over the text, so it is linear in the document's size.
"""

import bisect
import re
from dataclasses import dataclass

from artifactflow.documents import PAGE_BREAK

# In UTF-8 bytes, which count a Chinese character three times, about what it
# carries beside a letter: some 300 tokens in either language (1,500 letters or
# 500 characters), a few paragraphs.
PASSAGE_SIZE = 1500
PASSAGE_MAX_SIZE = 2500
HEADING_JOIN = " › "

_BLOCK = re.compile(r"[^\n]+(?:\n(?![ \t]*\n)[^\n]*)*")
_HEADING = re.compile(r"(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
# A sentence's end in either script, with what closes it (a quote, a bracket).
_SENTENCE_END = re.compile(r"[.!?。！？；]+[\"'”’)）」』]*\s*")


@dataclass(frozen=True)
class PassageSpan:
    start: int
    end: int
    heading: str = ""
    page: int | None = None


def text_size(text: str) -> int:
    return len(text.encode())


def passages_split(text: str, *, markdown: bool) -> list[PassageSpan]:
    """The passages of `text`, in order, covering all of its words; headings
    read from markdown's `#` lines when `markdown`."""
    breaks = [match.start() for match in re.finditer(PAGE_BREAK, text)]
    paged = bool(breaks)
    passages: list[PassageSpan] = []
    headings: list[str] = []
    start = end = size = 0
    opened = False

    def flush():
        nonlocal opened
        if opened:
            passages.append(_span(start, end, headings, _page(breaks, start) if paged else None))
        opened = False

    for block_start, block_end in _blocks(text):
        block = text[block_start:block_end]
        heading = _HEADING.match(block) if markdown and "\n" not in block.strip() else None
        if heading:
            flush()
            level = len(heading[1])
            headings[level - 1 :] = [heading[2].strip()]
            continue
        block_size = text_size(block)
        # What lies between the passage and the block is white space.
        gap = block_start - end
        if opened and (size + gap + block_size > PASSAGE_SIZE or (paged and PAGE_BREAK in text[end:block_start])):
            flush()
        if block_size > PASSAGE_MAX_SIZE:
            flush()
            for piece_start, piece_end in _sentences_grouped(text, block_start, block_end):
                passages.append(_span(piece_start, piece_end, headings, _page(breaks, piece_start) if paged else None))
            continue
        if not opened:
            start, size, opened = block_start, 0, True
        else:
            size += gap
        end = block_end
        size += block_size
    flush()
    return passages


def _span(start: int, end: int, headings: list[str], page: int | None) -> PassageSpan:
    return PassageSpan(start=start, end=end, heading=HEADING_JOIN.join(headings)[:1000], page=page)


def _page(breaks: list[int], offset: int) -> int:
    return bisect.bisect(breaks, offset) + 1


def _blocks(text: str):
    """The (start, end) of each paragraph (lines up to a blank line or a
    page break), a fenced code block with its blank lines kept whole."""
    fenced_from = None
    for match in _BLOCK.finditer(text):
        for piece in _page_pieces(text, match.start(), match.end()):
            fences = len(_FENCE.findall(text, *piece))
            if fenced_from is not None:
                if fences % 2:
                    yield fenced_from, piece[1]
                    fenced_from = None
                continue
            if fences % 2:
                fenced_from = piece[0]
                continue
            yield piece
    if fenced_from is not None:
        yield fenced_from, len(text.rstrip())


def _page_pieces(text: str, start: int, end: int):
    """The parts of a block between page breaks, stripped of white space."""
    for match in re.finditer(r"[^\f]+", text[start:end]):
        piece = match[0]
        left = len(piece) - len(piece.lstrip())
        right = len(piece.rstrip())
        if right > left:
            yield start + match.start() + left, start + match.start() + right


def _sentences_grouped(text: str, start: int, end: int):
    """A long paragraph in pieces of about PASSAGE_SIZE, cut after a
    sentence's end, and within a sentence longer than that."""
    units = []
    position = start
    for match in _SENTENCE_END.finditer(text, start, end):
        sentence = text[position : match.end()]
        if len(sentence) * 4 <= PASSAGE_SIZE:
            units.append((position, text_size(sentence)))
        else:
            units.extend(_cut(text, position, match.end()))
        position = match.end()
    units.extend(_cut(text, position, end))
    piece_start, size = start, 0
    for unit_start, unit_size in units:
        if size and size + unit_size > PASSAGE_SIZE:
            yield piece_start, unit_start
            piece_start, size = unit_start, 0
        size += unit_size
    yield piece_start, end


def _cut(text: str, start: int, end: int):
    """(start, size) of pieces of text[start:end] of at most PASSAGE_SIZE."""
    while start < end:
        window = text[start : min(end, start + PASSAGE_SIZE)]
        size = text_size(window)
        if size > PASSAGE_SIZE:
            window = window[: max(1, len(window) * PASSAGE_SIZE // size)]
            size = text_size(window)
        yield start, size
        start += len(window)
