"""Finding a model's slightly wrong old_str in an artifact: our approximate layer
against the seeds' fuzzysearch.find_near_matches, on the same documents.

Runs without Django: `python benchmarks/matching.py`.
"""

import random
import time
from functools import partial

from fuzzysearch import find_near_matches
from rapidfuzz.distance import Levenshtein

from artifacts.matching import compute_update

SIZES = (2_000, 10_000, 50_000)
OLD_LEN = 200
EDITS = 5
# fuzzysearch takes seconds per search, so fewer repeats as documents grow;
# the whole benchmark takes well under a minute.
FUZZYSEARCH_REPEAT = {2_000: 3, 10_000: 2, 50_000: 1}
OURS_REPEAT = 20

WORDS = (
    "the of and to in is was for on that with as by at from this be are an have which or not but their "
    "research model agent artifact report source evidence method result table figure team draft review "
    "analysis summary question answer data study market growth risk plan version section finding claim"
).split()


def _document(size: int, rnd: random.Random) -> str:
    sentences, length = [], 0
    while length < size:
        sentence = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(8, 20))).capitalize()
        sentence += ".\n\n" if rnd.random() < 0.2 else ". "
        sentences.append(sentence)
        length += len(sentence)
    return "".join(sentences)[:size]


def _with_edits(text: str, rnd: random.Random) -> str:
    """EDITS substitutions, insertions and deletions, away from the ends so the
    region both searches should report is unambiguous."""
    chars = list(text)
    for position in sorted(rnd.sample(range(10, len(text) - 10), EDITS), reverse=True):
        kind = rnd.choice(("substitute", "insert", "delete"))
        if kind == "substitute":
            chars[position] = "#"
        elif kind == "insert":
            chars.insert(position, "#")
        else:
            del chars[position]
    return "".join(chars)


def _best(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main():
    rnd = random.Random(2024)
    print(f"approximate match of a {OLD_LEN}-char old_str with {EDITS} edits, in prose:")
    for size in SIZES:
        content = _document(size, rnd)
        middle = size // 2 - OLD_LEN // 2
        old = _with_edits(content[middle : middle + OLD_LEN], rnd)
        max_l_dist = max(5, int(0.3 * len(old)))

        seeds, matches = _best(
            partial(find_near_matches, old, content, max_l_dist=max_l_dist), FUZZYSEARCH_REPEAT[size]
        )
        ours, result = _best(partial(compute_update, content, old, "NEW"), OURS_REPEAT)

        closest = min(matches, key=lambda match: match.dist)
        start, end = result.span
        assert result.ok and result.layer == "fuzzy", result
        assert Levenshtein.distance(old, content[start:end]) == closest.dist
        assert abs(closest.start - start) <= EDITS and abs(closest.end - end) <= EDITS, (closest, result.span)

        baseline_label = f"fuzzysearch (baseline, best of {FUZZYSEARCH_REPEAT[size]}):"
        ours_label = f"ours, all layers (best of {OURS_REPEAT}):"
        print(f"  {size // 1000:>2} KB  {baseline_label:<36}{seeds * 1000:9.2f} ms")
        print(f"         {ours_label:<36}{ours * 1000:9.2f} ms")
        print(f"         ratio: {seeds / ours:.0f}x faster")

    # Too slow to run fuzzysearch on: ours alone, to show the bound holds.
    megabyte = _document(1_000_000, rnd)
    middle = len(megabyte) // 2
    cases = {
        "1 MB prose, 5 edits": (megabyte, _with_edits(megabyte[middle : middle + OLD_LEN], rnd)),
        "1 MB repetitive table": ("| a | b | c |\n" * 70_000, "| a | b | x |\n" * 12),
    }
    print("ours alone, where fuzzysearch would take minutes:")
    for label, (content, old) in cases.items():
        seconds, result = _best(partial(compute_update, content, old, "NEW"), 3)
        outcome = f"matched ({result.layer})" if result.ok else f"refused: {result.error[:60]}…"
        print(f"  {label:<24}{seconds * 1000:9.2f} ms  {outcome}")


if __name__ == "__main__":
    main()
