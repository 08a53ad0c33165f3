"""A long text shown a page at a time: the pane inlines the first page of an
artifact and the next ones come in as the reader scrolls to them (or asks,
"Show more"), so a 20 MB upload costs a page's rendering, not the whole
text's. Pages are counted in characters (never in bytes, so no page ends
inside a Chinese character) and end between paragraphs where one ends near,
else at a line's end, never inside a fenced code block that closes in the
page: each page renders as the whole text would there."""

import bisect
import re
from dataclasses import dataclass

from django.db.models.functions import Substr

from .models import Artifact, ArtifactVersion

# A few screens of text: the first paints at once (a 200,000-character page
# took 0.7 CPU-s to render and seconds to lay out), and the reader scrolls
# into the next before reaching its end.
PAGE_CHARS = 20_000


# Where a page may start: SQL's substr takes a 32-bit position.
_START_MAX = 2**31 - 1 - PAGE_CHARS


@dataclass(frozen=True)
class TextPage:
    text: str
    # Where the page starts and ends in the whole text, in characters.
    start: int
    end: int
    total: int

    @property
    def more(self) -> bool:
        return self.end < self.total


# A line that opens or closes a fenced code block.
_FENCE = re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE)
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n")


def _cut(text: str, size: int) -> int:
    """Where a page of `text` (its first `size` characters) ends: after the
    last paragraph's end in its second half outside a code fence, else after
    its last line's end there, else at `size`. A page starts outside a fence
    (the first does, and each ends outside one), so counting the fence lines
    before a place says whether it is inside one."""
    fences = [match.start() for match in _FENCE.finditer(text)]
    ends = [match.end() for match in _PARAGRAPH_END.finditer(text, size // 2)]
    for end in reversed(ends):
        if bisect.bisect_left(fences, end) % 2 == 0:
            return end
    line = text.rfind("\n", size // 2)
    return line + 1 if line >= 0 else size


def page_of(*, part: str, start: int, total: int, size: int = PAGE_CHARS) -> TextPage:
    """The page that starts at `start`, from `part`, the text from there on
    (at least `size` characters of it when there are that many), cut as `_cut` says."""
    text = part[:size]
    if start + len(text) < total:
        text = text[: _cut(text, size)]
    return TextPage(text=text, start=start, end=start + len(text), total=total)


def text_first_page(*, text: str, size: int = PAGE_CHARS) -> TextPage:
    return page_of(part=text[:size], start=0, total=len(text), size=size)


def version_page(*, artifact: Artifact, version: int, start: int, size: int = PAGE_CHARS) -> TextPage | None:
    """A page of a saved version's text, cut out by the database: the request
    reads a page, never the whole text."""
    if not 0 <= start <= _START_MAX:
        return None
    row = (
        ArtifactVersion.objects.filter(artifact=artifact, version=version)
        .annotate(part=Substr("content", start + 1, size))
        .values_list("part", "length")
        .first()
    )
    if row is None or start > row[1]:
        return None
    part, total = row
    return page_of(part=part or "", start=start, total=total, size=size)
