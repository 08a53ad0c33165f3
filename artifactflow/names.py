"""Titles and file names as people read them: a conversation's title (the
model's, a person's, the question's), an artifact's, a source's, an uploaded
or exported file's name. Whoever makes one passes it through name_clean, so no
name carries a character that shows nothing or changes how the rest reads:
"photo", a right-to-left override (U+202E) and "gnp.exe" show as "photoexe.png".
"""

import re
import unicodedata

# Zero-width joiner and non-joiner: spelling in Persian and the Indic scripts,
# and what makes one emoji of several (👩‍🔬). Kept where they join two characters.
_JOINERS = frozenset("\u200c\u200d")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def name_clean(text: str) -> str:
    """`text` without control characters (Unicode category Cc), format
    characters (Cf: the bidirectional controls U+202A to U+202E, U+2066 to U+2069,
    U+200E, U+200F and U+061C, zero-width spaces, U+FEFF, the soft hyphen, tag
    characters…) and lone surrogates. Those that separate words (a tab, a line
    break, U+2028 and U+2029) become spaces; the caller collapses spaces as it
    wishes."""
    kept = []
    for index, char in enumerate(text):
        if not _hidden(char):
            kept.append(char)
        elif char.isspace():
            kept.append(" ")
        elif char in _JOINERS and _joins(text, index):
            kept.append(char)
    return "".join(kept)


def name_line(text: str) -> str:
    """`text` as a title shows: name_clean, on one line, its runs of spaces one space, trimmed."""
    return " ".join(name_clean(text).split())


def name_shortened(text: str, *, limit: int) -> str:
    """`text` whole when it has at most `limit` characters, else cut to fit
    with "…" after it: Latin text at its last space, text without spaces
    between its words (Chinese) anywhere. A page narrows a title further by
    its width, not here (the CSS ellipsis)."""
    if len(text) <= limit:
        return text
    cut, next_char = text[: limit - 1], text[limit - 1]
    in_a_word = not next_char.isspace() and not _HAN.match(cut[-1]) and not _HAN.match(next_char)
    if in_a_word and " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,，、:：;；") + "…"


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp")


def _joins(text: str, index: int) -> bool:
    """Whether the joiner at `index` stands between two characters that show."""
    if index == 0 or index == len(text) - 1:
        return False
    return all(not _hidden(char) and not char.isspace() for char in (text[index - 1], text[index + 1]))
