import unicodedata

import pytest

from artifactflow.names import name_clean, name_shortened

BIDI_CONTROLS = [
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
    "\u200e",
    "\u200f",
    "\u061c",
]


@pytest.mark.parametrize("control", BIDI_CONTROLS, ids=lambda char: f"U+{ord(char):04X}")
def test_every_bidirectional_control_goes(control):
    assert name_clean(f"photo{control}gnp.exe") == "photognp.exe"


def test_no_format_or_control_character_is_left_of_any_there_are():
    hidden = "".join(
        chr(code)
        for code in range(0x110000)
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs", "Zl", "Zp") and not chr(code).isspace()
    )

    assert name_clean(f"a{hidden}b") == "ab"


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("热泵的冬季表现", "热泵的冬季表现"),
        ("空气源热泵\u3000在低温下", "空气源热泵\u3000在低温下"),
        ("Zero\u200bwidth\u2060joined\ufeff", "Zerowidthjoined"),
        ("soft\u00adhyphen", "softhyphen"),
        ("England \U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f", "England \U0001f3f4"),
        # Whitespace controls and line separators part words rather than join them.
        ("tab\there\nand\u2028there\u2029", "tab here and there "),
        ("nul\x00and\x7fdelete\x9b", "nulanddelete"),
        ("lone \ud800 surrogate", "lone  surrogate"),
        # A joiner between two characters makes one emoji, or spells a Persian word.
        ("👩\u200d🔬 科学家", "👩\u200d🔬 科学家"),
        ("می\u200cخواهم", "می\u200cخواهم"),
        # Anywhere else it joins nothing.
        ("\u200dstart end\u200d", "start end"),
        ("a\u200d b \u200cc", "a b c"),
        ("a\u200d\u200db", "ab"),
        ("a\u202e\u200db", "ab"),
    ],
)
def test_what_shows_stays_and_what_does_not_goes(text, cleaned):
    assert name_clean(text) == cleaned


@pytest.mark.parametrize(
    ("text", "limit", "shortened"),
    [
        # Whole when it fits: a Chinese title is not cut at 20 characters.
        ("比较空气源热泵和家用储能电池在寒冷地区的适用性", 60, "比较空气源热泵和家用储能电池在寒冷地区的适用性"),
        ("空气源热泵" * 20, 60, ("空气源热泵" * 20)[:59] + "…"),
        # Latin text at its last space, never in a word.
        ("Heat pumps in deep cold and what they cost", 20, "Heat pumps in deep…"),
        ("Heat pumps in deep cold", 19, "Heat pumps in deep…"),
        ("Heat pumps 在严寒地区的效率", 14, "Heat pumps 在严…"),
    ],
)
def test_a_name_is_shortened_only_past_its_limit_and_says_so(text, limit, shortened):
    assert name_shortened(text, limit=limit) == shortened
    assert len(name_shortened(text, limit=limit)) <= limit
