"""A long markdown answer of a given size, as models write them: headings,
paragraphs, lists, a table and fenced code with blank lines inside."""

WORDS = (
    "the team library holds design notes about streaming answers over websockets "
    "and every turn writes its events to the log before the page is told"
).split()


def long_answer(*, tokens: int) -> str:
    """About `tokens` tokens (a word and its space count as one)."""
    parts, count, section = [], 0, 0
    while count < tokens:
        section += 1
        words = [WORDS[(section * 7 + i) % len(WORDS)] for i in range(60)]
        parts.append(f"## Section {section}\n")
        parts.append(" ".join(words[:30]).capitalize() + ", with **bold** and `code`.\n")
        parts.append("\n".join(f"- item {section}.{i}: {' '.join(words[i : i + 6])}" for i in range(5)) + "\n")
        parts.append(f"```python\ndef section_{section}():\n\n    return {section!r}\n```\n")
        parts.append("| key | value |\n|---|---|\n" + f"| section | {section} |\n")
        count += 30 + 5 * 9 + 8 + 12
    return "\n".join(parts)
