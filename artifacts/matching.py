"""Where an `update_artifact` edit lands: the text old_str names, found exactly,
then with typography normalised, then approximately.

Models copy text imperfectly: a curly quote comes back straight, a non-breaking
space as a space, a word with a typo. Each layer is tried only when the one
before found nothing, and every layer refuses rather than guesses when more
than one place fits. The search is bounded: a request that would take too long
fails with an error the model can act on instead of holding a worker.
"""

import bisect
import functools
import heapq
import re
import struct
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from rapidfuzz.distance import Levenshtein

# Wall-clock seconds one update may spend searching.
TIME_BUDGET = 0.8
# Longer old_str are not searched approximately: a model that means to replace
# this much text should rewrite the artifact instead.
FUZZY_MAX_OLD_LEN = 5_000
# len(old_str) × len(content) for a scan of the whole document: about half a
# second of big-int arithmetic, so an input this costly is refused up front
# rather than cut off by the deadline.
FULL_SCAN_MAX_CELLS = 400_000_000
# Seed lengths tried, longest first, before scanning the whole document, and
# how many seed occurrences make the seeds no better than a whole scan.
SEED_LENGTHS = (48, 24, 12)
MAX_SEED_HITS = 64

NOT_FOUND = "old_str was not found; read the artifact again and copy the text exactly"
MORE_CONTEXT = "include more surrounding text so it matches exactly one place"
TOO_COSTLY = (
    "old_str was not found exactly, and it is too long, or the artifact too large or repetitive, to search "
    "approximately; use rewrite_artifact or a shorter, more distinctive old_str copied exactly"
)


@dataclass(frozen=True)
class UpdateResult:
    ok: bool
    new_content: str | None
    # "exact", "normalized" or "fuzzy": the layer that matched, or that refused.
    layer: str | None
    # 1 - edits / len(old_str); 1.0 for exact and normalised matches.
    similarity: float
    # (start, end) of the replaced text in the original content.
    span: tuple[int, int] | None
    error: str = ""


def compute_update(content: str, old_str: str, new_str: str) -> UpdateResult:
    """Replace the one place in content that old_str names with new_str, or
    say why not."""
    if not old_str:
        return UpdateResult(
            ok=False,
            new_content=None,
            layer=None,
            similarity=0.0,
            span=None,
            error="old_str must not be empty; quote the text to replace",
        )
    deadline = time.monotonic() + TIME_BUDGET
    layer = "exact"
    try:
        outcome = _exact(content=content, old=old_str)
        if outcome is None:
            layer = "normalized"
            outcome = _normalised(content=content, old=old_str, deadline=deadline)
        if outcome is None:
            layer = "fuzzy"
            outcome = _approximate(content=content, old=old_str, deadline=deadline)
    except _BudgetSpent:
        outcome = _Refusal(TOO_COSTLY)
    if isinstance(outcome, _Refusal):
        return UpdateResult(
            ok=False, new_content=None, layer=layer, similarity=outcome.similarity, span=None, error=outcome.message
        )
    start, end = outcome.span
    return UpdateResult(
        ok=True,
        new_content=content[:start] + new_str + content[end:],
        layer=layer,
        similarity=outcome.similarity,
        span=outcome.span,
    )


@dataclass(frozen=True)
class _Found:
    span: tuple[int, int]
    similarity: float


@dataclass(frozen=True)
class _Refusal:
    message: str
    similarity: float = 0.0


class _BudgetSpent(Exception):
    pass


def _check(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise _BudgetSpent


def _line(content: str, position: int) -> int:
    return content.count("\n", 0, max(0, position)) + 1


# Layer 0 ---------------------------------------------------------------------


def _exact(*, content: str, old: str) -> _Found | _Refusal | None:
    start = content.find(old)
    if start == -1:
        return None
    # Overlapping occurrences ("aa" in "aaa") are different edits too.
    if content.find(old, start + 1) != -1:
        return _Refusal(f"old_str occurs {max(2, content.count(old))} times; {MORE_CONTEXT}")
    return _Found((start, start + len(old)), 1.0)


# Layer 1 ---------------------------------------------------------------------

# One character for one, so positions survive. Applied again after NFKC,
# which can produce some of them (U+FE58 small em dash becomes U+2014).
_TYPOGRAPHY = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u2035\u02bc", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u2036", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
}
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_LATIN = "A-Za-z0-9\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f"
# Found by scanning for the newline, far rarer than the blanks before it.
_BLANK_BEFORE_NEWLINE = re.compile(r"\n(?<=[ \t\r]\n)")
_HAS_CJK = re.compile(f"[{_CJK}]")
# Each match starts at the first space of its run, so a run is read once.
_CJK_SPACES = re.compile(rf" (?<=[{_CJK}] ) *+(?=[{_LATIN}])| (?<=[{_LATIN}] ) *+(?=[{_CJK}])")


@dataclass(frozen=True)
class _Group:
    """Where NFKC is not one character for one: an expanded ('Ⅳ' → 'IV') or
    merged (a base and its combining marks) group, which a match may take
    whole or not at all."""

    start: int  # in the NFKC text
    end: int
    orig_start: int
    orig_end: int


@dataclass(frozen=True)
class _Normalised:
    """Normalised text and the way back to the original: piece i of the text
    starts at starts[i] and came from origins[i], one character for one,
    unless groups[i] exists and holds the ends of a group, which maps whole."""

    text: str
    starts: list[int]
    origins: list[int]
    groups: dict[int, tuple[int, int]]

    def original_span(self, start: int, end: int) -> tuple[int, int] | None:
        """The original text that text[start:end] stands for, or None when that
        cuts through a group."""
        first = bisect.bisect_right(self.starts, start) - 1
        if first in self.groups:
            if start != self.starts[first]:
                return None
            orig_start = self.origins[first]
        else:
            orig_start = self.origins[first] + start - self.starts[first]
        last = bisect.bisect_right(self.starts, end - 1) - 1
        if last in self.groups:
            group_end, orig_end = self.groups[last]
            if end != group_end:
                return None
        else:
            orig_end = self.origins[last] + end - self.starts[last]
        return orig_start, orig_end


def _normalised(*, content: str, old: str, deadline: float) -> _Found | _Refusal | None:
    """The one place where old_str matches once both sides are normalised.
    Matches that cut through a group cannot be mapped back and are passed
    over (the approximate layer may still take the whole group)."""
    needle = _normalise(old, deadline=deadline).text
    haystack = _normalise(content, deadline=deadline)
    if not needle:
        return None
    spans = []
    at = haystack.text.find(needle)
    while at != -1 and len(spans) < 2:
        _check(deadline)
        span = haystack.original_span(at, at + len(needle))
        if span is not None:
            spans.append(span)
        at = haystack.text.find(needle, at + 1)
    if not spans:
        return None
    if len(spans) > 1:
        count = max(2, haystack.text.count(needle))
        return _Refusal(f"old_str matches {count} places once quotes, dashes and spaces are normalised; {MORE_CONTEXT}")
    return _Found(spans[0], 1.0)


def _normalise(text: str, *, deadline: float) -> _Normalised:
    nfkc, groups = _nfkc(_plain_typography(text), deadline=deadline)
    nfkc = _plain_typography(nfkc)
    drops = _dropped(nfkc, deadline=deadline)
    if groups:
        # Blanks inside a group's output stay: the group is only matched whole.
        group_starts = [group.start for group in groups]

        def outside_groups(drop: tuple[int, int]) -> bool:
            before = bisect.bisect_left(group_starts, drop[1]) - 1
            return before < 0 or groups[before].end <= drop[0]

        drops = list(filter(outside_groups, drops))
    pieces: list[str] = []
    starts: list[int] = []
    origins: list[int] = []
    group_ends: dict[int, tuple[int, int]] = {}
    at = 0  # length of the normalised text so far
    done = 0  # of the NFKC text
    shift = 0  # original position minus NFKC position, between groups
    cuts = heapq.merge(((*drop, None) for drop in drops), ((g.start, g.end, g) for g in groups), key=lambda cut: cut[0])
    # A last, empty cut at the end keeps the text after the final cut.
    for cut_start, cut_end, group in [*cuts, (len(nfkc), len(nfkc), None)]:
        _check(deadline)
        if cut_start > done:
            starts.append(at)
            origins.append(done + shift)
            pieces.append(nfkc[done:cut_start])
            at += cut_start - done
        if group is not None:
            group_ends[len(starts)] = (at + group.end - group.start, group.orig_end)
            starts.append(at)
            origins.append(group.orig_start)
            pieces.append(nfkc[group.start : group.end])
            at += group.end - group.start
            shift = group.orig_end - group.end
        done = cut_end
    return _Normalised("".join(pieces), starts, origins, group_ends)


def _plain_typography(text: str) -> str:
    # Once text is not ASCII, str.translate looks up a dict per character; a
    # str.replace per character present is some twenty times faster.
    for fancy, plain in _TYPOGRAPHY.items():
        if fancy in text:
            text = text.replace(fancy, plain)
    return text


def _dropped(text: str, *, deadline: float) -> list[tuple[int, int]]:
    """Where normalising drops characters: blanks (and a CRLF's CR) at the end
    of a line, and spaces between CJK and Latin letters or digits."""
    spans = []
    for line_end in [hit.start() for hit in _BLANK_BEFORE_NEWLINE.finditer(text)] + [len(text)]:
        _check(deadline)
        line_start = text.rfind("\n", 0, line_end) + 1
        blanks_start = line_start + len(text[line_start:line_end].rstrip(" \t\r"))
        if blanks_start < line_end:
            spans.append((blanks_start, line_end))
    if not text.isascii() and _HAS_CJK.search(text):
        _check(deadline)
        spans.extend(hit.span() for hit in _CJK_SPACES.finditer(text))
        spans.sort()
    return spans


def _nfkc(text: str, *, deadline: float) -> tuple[str, list[_Group]]:
    """NFKC of text, and the groups where it is not one character for one.

    NFKC is applied per chunk, cut before every character that nothing
    preceding can combine with, so each output character is known to come from
    its chunk. Only the stretches that are not already normalised are chunked:
    they are found by halving the text while unicodedata.is_normalized says no.
    """
    parts: list[str] = []
    groups: list[_Group] = []
    out = done = 0
    for start, end in _unnormalised(text, start=0, end=len(text), deadline=deadline):
        _check(deadline)
        parts.append(text[done:start])
        out += start - done
        done = end
        normal = unicodedata.normalize("NFKC", text[start:end])
        # Every character its own chunk and as many out as in: one for one
        # (fullwidth letters), so nothing to record.
        if len(normal) == end - start and all(map(_starts_chunk, text[start + 1 : end])):
            parts.append(normal)
            out += len(normal)
            continue
        for chunk_start, chunk_end in _chunks(text, start=start, end=end):
            source = text[chunk_start:chunk_end]
            normal = unicodedata.normalize("NFKC", source)
            if normal != source and not len(source) == len(normal) == 1:
                groups.append(_Group(out, out + len(normal), chunk_start, chunk_end))
            parts.append(normal)
            out += len(normal)
    parts.append(text[done:])
    return "".join(parts), groups


def _unnormalised(text: str, *, start: int, end: int, deadline: float) -> Iterator[tuple[int, int]]:
    """Stretches of text[start:end], each starting at a chunk boundary, outside
    which NFKC changes nothing."""
    if unicodedata.is_normalized("NFKC", text[start:end]):
        return
    _check(deadline)
    if end - start > 64:
        middle = (start + end) // 2
        cut = next((i for i in range(middle, end) if _starts_chunk(text[i])), None)
        if cut is None:
            cut = next((i for i in range(middle - 1, start, -1) if _starts_chunk(text[i])), None)
        if cut is not None:
            yield from _unnormalised(text, start=start, end=cut, deadline=deadline)
            yield from _unnormalised(text, start=cut, end=end, deadline=deadline)
            return
    yield start, end


def _chunks(text: str, *, start: int, end: int) -> Iterator[tuple[int, int]]:
    chunk_start = start
    for i in range(start + 1, end):
        if _starts_chunk(text[i]):
            yield chunk_start, i
            chunk_start = i
    yield chunk_start, end


@functools.lru_cache(maxsize=4096)
def _starts_chunk(char: str) -> bool:
    """Whether normalising text before and from `char` separately gives the same
    as normalising it whole: its decomposition starts with a character that
    neither reorders with (a combining mark) nor composes with what precedes it."""
    first = unicodedata.normalize("NFKD", char)[0]
    return unicodedata.combining(first) == 0 and first not in _second_in_composition()


@functools.cache
def _second_in_composition() -> frozenset[str]:
    """Characters that canonical composition can join to the one before them.

    Read from the Unicode database rather than listed, so a new Python's
    Unicode version stays right. Canonical pairs all lie below U+20000 (the
    planes above hold only single-character compatibility ideographs); the
    Hangul vowel and trailing jamo compose by algorithm and have no entry.
    """
    seconds = {chr(cp) for cp in range(0x1161, 0x1176)} | {chr(cp) for cp in range(0x11A8, 0x11C3)}
    for code_point in range(0x20000):
        decomposition = unicodedata.decomposition(chr(code_point)).split()
        # Excluded composites (NFC decomposes them for good) never recompose.
        if len(decomposition) == 2 and decomposition[0][0] != "<" and unicodedata.is_normalized("NFC", chr(code_point)):
            seconds.add(chr(int(decomposition[1], 16)))
    return frozenset(seconds)


# Layer 2 ---------------------------------------------------------------------


def _approximate(*, content: str, old: str, deadline: float) -> _Found | _Refusal:
    """The substring of content with the fewest edits from old_str, when that
    is close enough and in one place."""
    m = len(old)
    # similarity = 1 - edits / len(old_str): the share of old_str that is
    # intact (rapidfuzz's normalized_similarity divides by the longer string
    # instead). The seeds' bound of max(5, 30%) edits together with the 70%
    # similarity floor leaves 30% of len(old_str); below 17 characters the
    # floor is the tighter of the two.
    limit = 3 * m // 10
    if limit == 0:
        return _Refusal(NOT_FOUND)
    if m > FUZZY_MAX_OLD_LEN:
        return _Refusal(TOO_COSTLY)
    found = _seeded_search(content=content, old=old, limit=limit, deadline=deadline)
    if found is None:
        if m * len(content) > FULL_SCAN_MAX_CELLS:
            return _Refusal(TOO_COSTLY)
        found = _best_ends(pattern=old, text=content, deadline=deadline)
    distance, ends = found
    if not ends:
        return _Refusal(NOT_FOUND)
    similarity = max(0.0, 1 - distance / m)
    if distance > limit:
        return _Refusal(
            f"old_str was not found; the closest text (line {_line(content, ends[0] - m)}) is only "
            f"{similarity:.0%} similar and at least 70% is needed. Read the artifact again and copy the text exactly",
            similarity,
        )
    # Best windows whose ends lie within `distance` of each other are one
    # place seen with an edit at its edge counted either way ("abcX" against
    # "abcYZ" ends after c or after Y); any further apart and they are
    # different places, however close.
    if ends[-1] - ends[0] > distance:
        return _Refusal(
            f"old_str was not found exactly, and two or more different places match it equally well "
            f"({similarity:.0%} similar, at lines {_line(content, ends[0] - m)} and {_line(content, ends[-1] - m)}); "
            f"{MORE_CONTEXT}",
            similarity,
        )
    windows = [_window(content=content, old=old, end=end, distance=distance) for end in ends]
    # Of the readings of that place, the one closest to old_str's length, and
    # then the longer, so an extra character at the edge is replaced rather
    # than left behind.
    start, end = min(windows, key=lambda w: (abs(w[1] - w[0] - m), w[0] - w[1]))
    return _Found((start, end), similarity)


def _window(*, content: str, old: str, end: int, distance: int) -> tuple[int, int]:
    """The start of a window ending at `end` that is `distance` edits from old,
    preferring lengths closest to len(old), then longer."""
    m = len(old)
    starts = range(max(0, end - m - distance), end - m + distance + 1)
    fits = [s for s in starts if Levenshtein.distance(old, content[s:end], score_cutoff=distance) <= distance]
    start = min(fits, key=lambda s: (abs(end - s - m), s))
    return start, end


def _seeded_search(*, content: str, old: str, limit: int, deadline: float) -> tuple[int, list[int]] | None:
    """The best windows when they are close enough to be found from exact seeds,
    else None.

    Split old_str into k + 1 pieces: a window within k edits of it contains one
    piece untouched, near that piece's place in old_str. So searching only
    around the pieces' occurrences finds every window within k edits, and if
    the best of them is within k it is the best in the whole document.
    """
    m = len(old)
    for seed_length in SEED_LENGTHS:
        slack = min(limit, m // seed_length - 1)
        if slack < 1:
            continue
        regions = _seed_regions(content=content, old=old, slack=slack)
        if regions is None:
            continue
        best, ends = m + 1, []
        for region_start, region_end in regions:
            distance, region_ends = _best_ends(pattern=old, text=content[region_start:region_end], deadline=deadline)
            if distance < best:
                best, ends = distance, []
            if distance == best:
                ends.extend(region_start + end for end in region_ends)
        if ends and best <= slack:
            return best, ends
    return None


def _seed_regions(*, content: str, old: str, slack: int) -> list[tuple[int, int]] | None:
    """Merged regions of content holding every window within `slack` edits of
    old, or None when the seeds are too common to narrow anything down."""
    m = len(old)
    size = m // (slack + 1)
    regions = []
    for offset in range(0, size * (slack + 1), size):
        piece = old[offset : offset + size]
        at = content.find(piece)
        while at != -1:
            # The window starts within `slack` of where the piece puts it, and
            # is at most `slack` longer than old.
            regions.append((max(0, at - offset - slack), min(len(content), at - offset + m + 2 * slack)))
            if len(regions) > MAX_SEED_HITS:
                return None
            at = content.find(piece, at + 1)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(regions):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    if sum(end - start for start, end in merged) * m > FULL_SCAN_MAX_CELLS:
        return None
    return merged


def _best_ends(*, pattern: str, text: str, deadline: float) -> tuple[int, list[int]]:
    """The least edit distance from pattern to any substring of text (Sellers'
    semi-global alignment), and the ends of substrings that achieve it (all of
    them, or enough to show they are far apart).

    Bit-parallel (Myers 1999, in Hyyrö's formulation) with the bit vectors laid
    along the text rather than the pattern: the Python loop runs once per
    pattern character, and the work per text character happens inside
    CPython's big-int arithmetic. Bit j of the row vectors holds
    D[i][j + 1] - D[i][j]; row 0 is all zeros because a window may start
    anywhere, column 0 is D[i][0] = i.
    """
    n = len(text)
    if n == 0:
        return len(pattern), []
    full = (1 << n) - 1
    eqs = _char_masks(text=text, alphabet=set(pattern), deadline=deadline)
    plus = minus = 0  # horizontal deltas +1 / -1 of the current row
    for char in pattern:
        _check(deadline)
        eq = eqs.get(char, 0)
        x_row = eq | minus
        x_col = (((eq & plus) + plus) ^ plus) | eq
        col_plus = minus | ~(x_col | plus)
        col_minus = plus & x_col
        col_plus = ((col_plus << 1) | 1) & full  # D[i][0] - D[i-1][0] = 1
        col_minus <<= 1
        plus = (col_minus | ~(x_row | col_plus)) & full
        minus = col_plus & x_row
    return _row_minimum(plus=plus, minus=minus, n=n, first=len(pattern), deadline=deadline)


def _row_minimum(*, plus: int, minus: int, n: int, first: int, deadline: float) -> tuple[int, list[int]]:
    """The minimum of D[j] = first + (sum of the deltas up to j) over j in 1..n,
    and where it is reached.

    The row is read in 64-column blocks: a block's value can fall no lower than
    its starting value less its -1 steps, so blocks are visited from the lowest
    such bound and the walk stops at the first block that cannot reach the
    minimum found so far, or as soon as the minimum cannot change and two ends
    lie further apart than it (two places). Ends are kept only until there are
    more than fit in a span of `minimum` columns, which proves the same.
    """
    width = (n + 63) // 64
    plus_words = struct.unpack(f"<{width}Q", plus.to_bytes(8 * width, "little"))
    minus_words = struct.unpack(f"<{width}Q", minus.to_bytes(8 * width, "little"))
    steps = (up.bit_count() - down.bit_count() for up, down in zip(plus_words, minus_words, strict=True))
    starts = list(accumulate(steps, initial=first))
    bounds = [start - down.bit_count() for start, down in zip(starts, minus_words, strict=False)]
    best, ends = first, []
    for block in sorted(range(width), key=bounds.__getitem__):
        if bounds[block] > best:
            break
        # No block left can go lower, and two places are already proven.
        if bounds[block] == best and ends and max(ends) - min(ends) > best:
            break
        _check(deadline)
        value, up, down = starts[block], plus_words[block], minus_words[block]
        for bit in range(min(64, n - 64 * block)):
            value += (up >> bit & 1) - (down >> bit & 1)
            if value < best:
                best, ends = value, []
            if value == best and len(ends) <= best + 1:
                ends.append(64 * block + bit + 1)
    return best, sorted(ends)


def _char_masks(*, text: str, alphabet: set[str], deadline: float) -> dict[str, int]:
    """For each character of alphabet found in text, an int with bit j set
    where text[j] is that character.

    Built with C-speed bytes operations: the text is coded one byte per
    character, each byte turned to b"1" or b"0" with bytes.translate, and the
    reversed string parsed as a base-2 int (so that bit 0 is text[0]).
    """
    if text.isascii():
        coded = [(text.encode("ascii")[::-1], {char: ord(char) for char in alphabet if char.isascii()})]
    else:
        # A byte holds 255 codes (0 is "not in the alphabet"), so larger
        # alphabets take several passes.
        absent = dict.fromkeys(map(ord, set(text)), 0)
        chars = sorted(alphabet)
        coded = []
        for group_start in range(0, len(chars), 255):
            codes = {char: code for code, char in enumerate(chars[group_start : group_start + 255], start=1)}
            table = absent | {ord(char): code for char, code in codes.items()}
            coded.append((text.translate(table).encode("latin-1")[::-1], codes))
    masks = {}
    for data, codes in coded:
        for char, code in codes.items():
            _check(deadline)
            masks[char] = int(data.translate(_bit_table(code)), 2)
    return masks


@functools.cache
def _bit_table(code: int) -> bytes:
    return bytes.maketrans(bytes(range(256)), b"0" * code + b"1" + b"0" * (255 - code))
