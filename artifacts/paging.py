"""A long text shown a page at a time: the pane inlines the first page of an
artifact and the reader asks for the next ones ("Show more"), so a 20 MB
upload costs a page's rendering, not the whole text's. Pages are counted in
characters (never in bytes, so no page ends inside a Chinese character) and
end at a line's end where one is near, so markdown and code render whole lines."""

from dataclasses import dataclass

from django.db.models.functions import Length, Substr

from .models import Artifact, ArtifactVersion

# About 200 KB of English: renders in well under a second and reads as a long page.
PAGE_CHARS = 200_000


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


def page_of(*, part: str, start: int, total: int, size: int = PAGE_CHARS) -> TextPage:
    """The page that starts at `start`, from `part`, the text from there on
    (at least `size` characters of it when there are that many): cut at the
    last line's end in its second half, else at `size`."""
    text = part[:size]
    if start + len(text) < total:
        cut = text.rfind("\n", size // 2)
        if cut >= 0:
            text = text[: cut + 1]
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
        .annotate(part=Substr("content", start + 1, size), total=Length("content"))
        .values_list("part", "total")
        .first()
    )
    if row is None or start > row[1]:
        return None
    part, total = row
    return page_of(part=part or "", start=start, total=total, size=size)
