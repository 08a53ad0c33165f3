"""The citation check's bound: a 200-page source and 200 quotations, checked
as agents.services.citations checks them (the report's citations read, the
source made comparable once, each quotation looked up), against the 2 s the
check may take; the baseline is plain substring search of the same quotations
in the same text, measured in the same run. And the snapshot page's marking of
a quotation spelt otherwise (artifactflow.markdown.passage_mark's last
resort), on a page of the most the page shows.

`python benchmarks/citations.py`
"""

import random
import time

from setup_django import setup

setup()

from artifactflow.citations import citations_read  # noqa: E402
from artifactflow.markdown import markdown_render, markdown_tokens, passage_mark  # noqa: E402
from artifactflow.textsearch import words_comparable  # noqa: E402

PAGES = 200
PAGE_CHARS = 3_000
QUOTES = 200
SYLLABLES = "热泵效率安装价格补贴噪声能耗地区气候温度室外机组系统运行维护成本"
WORDS = "heat pump efficiency install price subsidy noise energy region climate outdoor unit system cost".split()


def _source(rnd: random.Random) -> str:
    pages = []
    for number in range(PAGES):
        if number % 2:
            text = "".join(rnd.choice(SYLLABLES) + ("，" if rnd.random() < 0.1 else "") for _ in range(PAGE_CHARS))
        else:
            text = " ".join(rnd.choice(WORDS) for _ in range(PAGE_CHARS // 7))
        pages.append(text[:PAGE_CHARS])
    return "\n\n".join(pages)


def _report(source: str, rnd: random.Random) -> str:
    lines = []
    for number in range(QUOTES):
        if number % 2:
            # An invented quotation.
            quote = "".join(rnd.choice(SYLLABLES) for _ in range(30))
        else:
            start = rnd.randrange(len(source) - 200)
            # A real one, its punctuation and spaces spelt otherwise.
            quote = source[start : start + 120].replace("，", ",").replace(" ", "  ").replace("\n", " ")
        lines.append(f"Claim {number}: “{quote}” [1].")
    return "\n\n".join(lines) + "\n\n## Sources\n[1] [Handbook](https://handbook.example/)\n"


def _check(report: str, source: str) -> int:
    found = citations_read(markdown_tokens(report))
    comparable = words_comparable(source)
    return sum(words_comparable(quote) not in comparable for quote, _reference in found.quotes())


def _plain(report: str, source: str) -> int:
    found = citations_read(markdown_tokens(report))
    return sum(quote not in source for quote, _reference in found.quotes())


def _seconds(work) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    rnd = random.Random(51)
    source = _source(rnd)
    report = _report(source, rnd)
    missing = _check(report, source)
    checked = _seconds(lambda: _check(report, source))
    plain = _seconds(lambda: _plain(report, source))
    print(
        f"citation check: {QUOTES} quotations in a {PAGES}-page source ({len(source):,} characters): "
        f"{checked:.3f} s (bound 2 s; {checked / plain:.1f}x plain substring search, {plain:.3f} s); "
        f"{missing} not found of {QUOTES // 2} invented"
    )
    page = markdown_render(source[:200_000])
    # Late on the page, in Chinese, round a comma the quotation spells as ASCII.
    comma = source.index("，", 190_000)
    quote = source[comma - 60 : comma + 60].replace("，", ",")
    marked = _seconds(lambda: passage_mark(page, quote))
    exact = _seconds(lambda: passage_mark(page, source[comma - 60 : comma + 60]))
    assert passage_mark(page, quote)[1]
    print(
        f"snapshot page: marking a quotation spelt otherwise on a 200,000-character page: {marked:.3f} s "
        f"({marked / exact:.0f}x marking it as spelt, {exact:.3f} s)"
    )


if __name__ == "__main__":
    main()
