"""The diff the pane shows between two texts: the changed lines with a few
around them, as a unified diff, a replaced line's changed words marked. It
works on text alone: which versions to compare is the pane's business
(`artifacts.pane`)."""

import difflib
import re
from dataclasses import dataclass

# A word keeps the spaces after it: a sentence is half as many tokens, and an
# edit is marked as the words it changed. A mark of punctuation stands alone,
# so ticking "- [ ]" marks the "x" that went in.
_WORDS = re.compile(r"\w+\s*|[^\w\s]|\s+")
# Comparing words costs up to the product of the two lines' lengths. A pair
# longer than this (in characters, both lines together), and every pair after
# a diff has compared this many, shows as changed whole, with no word marks:
# a rewrite of a 200 KB artifact still diffs in about 0.1 s.
WORD_DIFF_MAX_LINE = 10_000
WORD_DIFF_BUDGET = 100_000
# Two lines less alike than this are different lines, not an edit of one:
# marking their words would mark nearly all of them.
WORD_DIFF_MIN_RATIO = 0.4
DIFF_CONTEXT = 3

Parts = tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk" or "same"
    sign: str
    # The text in runs, each with whether it is a changed word; only a line
    # paired with the one it replaced has changed words.
    parts: Parts


def _line(kind: str, sign: str, text: str) -> DiffLine:
    return DiffLine(kind=kind, sign=sign, parts=((text, False),))


def _range(start: int, stop: int) -> str:
    """A hunk's lines as unified diffs write them: "3" for one, "3,4" for more, "2,0" for none after line 2."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _runs(tokens: list[str], opcodes, *, side: int, unchanged: str) -> Parts:
    runs = []
    for tag, *spans in opcodes:
        text = "".join(tokens[spans[side] : spans[side + 1]])
        if not text:
            continue
        if tag in ("equal", unchanged):
            runs.append((text, False))
            continue
        # The spaces after a changed word are not part of the change.
        word = text.rstrip() or text
        runs += [(word, True), (text[len(word) :], False)] if len(word) < len(text) else [(word, True)]
    return tuple(runs)


def _word_marks(old: str, new: str) -> tuple[Parts, Parts] | None:
    """The runs of both lines with the words that changed marked, or None when
    the lines are too unlike for the marks to help."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    matcher = difflib.SequenceMatcher(None, a, b)
    opcodes = matcher.get_opcodes()
    if matcher.ratio() < WORD_DIFF_MIN_RATIO:
        return None
    return _runs(a, opcodes, side=0, unchanged="insert"), _runs(b, opcodes, side=2, unchanged="delete")


def artifact_diff(*, old: str, new: str) -> list[DiffLine]:
    """The changed lines with a few lines around them, as a unified diff; a
    removed line followed by the line that replaced it has its changed words
    marked."""
    a, b = old.splitlines(), new.splitlines()
    budget = WORD_DIFF_BUDGET
    lines = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(DIFF_CONTEXT):
        lines.append(
            _line("hunk", "", f"@@ -{_range(group[0][1], group[-1][2])} +{_range(group[0][3], group[-1][4])} @@")
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [_line("same", " ", text) for text in a[i1:i2]]
                continue
            removed = [((text, False),) for text in a[i1:i2]]
            added = [((text, False),) for text in b[j1:j2]]
            # The first removed line pairs with the first added one, and so on; the rest have no partner.
            for k, (was, now) in enumerate(zip(a[i1:i2], b[j1:j2], strict=False)):
                cost = len(was) + len(now)
                if cost > WORD_DIFF_MAX_LINE or cost > budget:
                    continue
                budget -= cost
                removed[k], added[k] = _word_marks(was, now) or (removed[k], added[k])
            lines += [DiffLine(kind="del", sign="-", parts=parts) for parts in removed]
            lines += [DiffLine(kind="add", sign="+", parts=parts) for parts in added]
    return lines
