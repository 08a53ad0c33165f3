"""Numbered references read from markdown (artifactflow.citations): the
sources a report lists, and each marker with the quotation it follows."""

import pytest

from artifactflow.citations import Reference, citations_read
from artifactflow.markdown import markdown_tokens

REPORT = """# 热泵报告

Heat pumps kept homes “at 20 °C down to −15 °C outside” [1]. The median SCOP was 3.1 [1, 2].
安装价格为“每千瓦一千二百元”。[2] A year [2026] and a missing source [7] are no citations,
nor is `[1]` in code or [a link [1]](https://x.example/).

## Sources
[1] [Heat pump survey 2026](https://survey.example/2026)
[2] 今日热泵价格 https://prices.example/today.
"""


def _read(text: str):
    return citations_read(markdown_tokens(text))


def test_the_sources_and_markers_of_a_report_are_read_with_their_quotations():
    found = _read(REPORT)

    assert found.references == {
        1: Reference(number=1, href="https://survey.example/2026", title="Heat pump survey 2026"),
        2: Reference(number=2, href="https://prices.example/today", title="今日热泵价格"),
    }
    assert [(marker.numbers, marker.quote) for marker in found.markers] == [
        ((1,), "at 20 °C down to −15 °C outside"),
        ((1, 2), ""),
        ((2,), "每千瓦一千二百元"),
    ]
    assert [(quote, reference.number) for quote, reference in found.quotes()] == [
        ("at 20 °C down to −15 °C outside", 1),
        ("每千瓦一千二百元", 2),
    ]


def test_a_numbered_list_under_a_sources_heading_is_read_too():
    found = _read(
        'A "straight quote," [2] and [1].\n\n## 参考资料\n\n1. [甲](library://3#2)\n2. [B](https://b.example/)\n'
    )

    assert [reference.href for reference in found.references.values()] == ["library://3#2", "https://b.example/"]
    assert [(marker.numbers, marker.quote) for marker in found.markers] == [((2,), "straight quote,"), ((1,), "")]


@pytest.mark.parametrize(
    "text",
    [
        "A claim [1].",  # no sources listed
        "1. [A](https://a.example/)\n2. [B](https://b.example/)\n\nA claim [1].",  # a list, but no sources heading
        "## Sources\n\n[1] no address at all\n\nA claim [1].",
    ],
)
def test_text_without_a_source_for_the_marker_cites_nothing(text):
    assert _read(text).markers == []


def test_a_quotation_is_the_one_right_before_its_marker():
    found = _read("He said “one thing” and later “another” [1].\n\n## Sources\n[1] https://a.example/\n")

    assert [marker.quote for marker in found.markers] == ["another"]
