"""What changed between two versions of a report, said as its reader would:
the sections added, changed and gone, by their headings, and in a changed
section the figures that came and went. It works on text alone: which
versions to compare is the caller's (agents.services.changes)."""

import re
from collections import Counter
from dataclasses import dataclass, field

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
# A number as a report writes one: 1,350 or 3.5 or 40 %, with a currency or a
# Chinese magnitude after it, and right after Chinese words too (约12万); not a
# part of a word (COP3, v2); list markers (_LIST_MARKER) and heading levels are no figures.
_FIGURE = re.compile(r"(?<![A-Za-z\d_.])[-+]?\d+(?:[,.]\d+)*(?:\s?(?:%|％|万|亿|元|(?:k|K|M|bn)(?![A-Za-z])))?")
_LIST_MARKER = re.compile(r"^[ \t]*\d+[.)](?=[ \t])", re.MULTILINE)
# A changed section names at most this many figures each way: a summary, not a diff.
FIGURES_SHOWN = 4


@dataclass(frozen=True)
class SectionChange:
    heading: str
    # Figures in the new text and not the old, and the other way round.
    figures_added: tuple[str, ...] = ()
    figures_gone: tuple[str, ...] = ()


@dataclass(frozen=True)
class Changes:
    added: list[str] = field(default_factory=list)
    changed: list[SectionChange] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.gone)


def _sections(text: str) -> dict[str, tuple[str, str]]:
    """Each section's key (its heading folded, numbered when repeated) → (heading, body).
    Text before the first heading is the section with the empty heading."""
    sections: dict[str, tuple[str, str]] = {}
    starts = list(_HEADING.finditer(text))
    bounds = [(None, 0, starts[0].start() if starts else len(text))]
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        bounds.append((match, match.end(), end))
    for match, start, end in bounds:
        heading = match[2].strip() if match else ""
        key = " ".join(heading.casefold().split())
        repeated = 1
        while key + (f"#{repeated}" if repeated > 1 else "") in sections:
            repeated += 1
        if repeated > 1:
            key += f"#{repeated}"
        sections[key] = (heading, text[start:end])
    return sections


def _figures(text: str) -> Counter:
    text = _LIST_MARKER.sub("", text)
    return Counter(match[0].replace(" ", "") for match in _FIGURE.finditer(text))


def _words(text: str) -> str:
    """The text without its whitespace: a reflowed paragraph, English or Chinese
    (where a line break between characters is no space), is the same text."""
    return "".join(text.split())


def changes_between(*, before: str, after: str) -> Changes:
    """The sections of `after` not in `before`, those in both whose words
    differ (with the figures that changed), and those gone."""
    old, new = _sections(before), _sections(after)
    changes = Changes()
    for key, (heading, body) in new.items():
        if key not in old:
            if heading:
                changes.added.append(heading)
            continue
        if _words(old[key][1]) == _words(body):
            continue
        was, now = _figures(old[key][1]), _figures(body)
        changes.changed.append(
            SectionChange(
                heading=heading,
                figures_added=tuple(list((now - was).elements())[:FIGURES_SHOWN]),
                figures_gone=tuple(list((was - now).elements())[:FIGURES_SHOWN]),
            )
        )
    changes.gone.extend(heading for key, (heading, _) in old.items() if key not in new and heading)
    return changes
