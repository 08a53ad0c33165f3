"""The diff between two versions: unified lines, the changed words of a
replaced line marked, everything escaped, and bounded work at real size."""

import time

from artifacts.diff import WORD_DIFF_BUDGET, artifact_diff
from artifacts.templatetags.artifact_rendering import render_diff


def _marked(line) -> list[str]:
    return [text for text, changed in line.parts if changed]


def test_a_replaced_line_marks_only_the_words_that_changed():
    lines = artifact_diff(
        old="# Findings\nHeat pumps work well in mild winters.\nend\n",
        new="# Findings\nHeat pumps work badly in cold winters.\nend\n",
    )

    [removed] = [line for line in lines if line.kind == "del"]
    [added] = [line for line in lines if line.kind == "add"]
    assert _marked(removed) == ["well", "mild"]
    assert _marked(added) == ["badly", "cold"]
    assert "".join(text for text, _ in removed.parts) == "Heat pumps work well in mild winters."
    assert [line.kind for line in lines] == ["hunk", "same", "del", "add", "same"]
    assert lines[0].parts == (("@@ -1,3 +1,3 @@", False),)


def test_unlike_lines_are_changed_whole_and_lines_that_look_like_headers_stay():
    lines = artifact_diff(old="intro\n---\nold closing words\n", new="intro\nA new paragraph entirely.\n")

    changed = [(line.kind, line.parts) for line in lines if line.kind in ("del", "add")]
    # A markdown rule is a removed line like any other, not a file header to drop.
    assert changed == [
        ("del", (("---", False),)),
        ("del", (("old closing words", False),)),
        ("add", (("A new paragraph entirely.", False),)),
    ]


def test_the_html_escapes_every_text_and_puts_lines_next_to_each_other():
    lines = artifact_diff(old='<b>"x"</b> & <script>a</script>\n', new='<b>"y"</b> & <script>a</script>\n')

    html = render_diff(lines)

    assert "<script>" not in html and "<b>" not in html
    assert "<del>x</del>" in html and "<ins>y</ins>" in html
    assert "&lt;b&gt;&quot;" in html and "&amp; &lt;script&gt;" in html
    # One block per line and nothing between them: inside the pane's
    # pre-wrapped lines a newline would double the spacing.
    assert "\n" not in html
    assert html.count('<div class="diff-line') == len(lines) == 3


def test_a_huge_line_is_changed_whole_and_a_200_kb_rewrite_stays_quick():
    huge = "word " * 5000
    [_, removed, added] = artifact_diff(old=huge, new=huge + "more")
    assert not _marked(removed) and not _marked(added)

    old = "".join(f"- [ ] item {n}: {'words ' * 30}\n" for n in range(1100))
    new = old.replace("- [ ]", "- [x]")
    started = time.perf_counter()
    lines = artifact_diff(old=old, new=new)
    elapsed = time.perf_counter() - started

    marked = [line for line in lines if line.kind == "add" and _marked(line)]
    # The first pairs are marked until the budget is spent; the rest show whole.
    assert marked and marked[0].parts == (("- [", False), ("x", True), ("] item 0: " + "words " * 30, False))
    assert 0 < len(marked) < 1100
    assert len(marked) <= WORD_DIFF_BUDGET // (2 * len(old.splitlines()[0])) + 1
    assert elapsed < 2.0
