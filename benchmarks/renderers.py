"""What bounding the renderers costs and saves, against markdown-it and
Pygments run unbounded in the same run: hostile markdown (markdown-it's
quadratic case, at two sizes) rendered bounded or not; an ordinary 5,000-token answer with
code, and a 200 KB Python file, whose time the checks may only slightly raise;
and the fence the probe found (mcschema on "<!--"), which unbounded never ends
and so is measured for its first 300,000 tokens only."""

import itertools
import time
from functools import partial

import nh3
from markdown_it import MarkdownIt
from mdit_py_plugins.tasklists import tasklists_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from artifactflow import markdown

ANSWER = (
    "## 热泵研究\n\nThe heat pump moves heat rather than making it; 热泵搬运热量而不是产生热量。 " * 120
    + "\n\n```python\n"
    + "def cop(t_hot, t_cold):\n    return t_hot / (t_hot - t_cold)\n" * 60
    + "```\n\n| a | b |\n|---|---|\n"
    + "| 1 | 2 |\n" * 60
)
PYTHON_FILE = "def cop(t_hot: float, t_cold: float) -> float:\n    return t_hot / (t_hot - t_cold)  # 注释\n" * 2400
HOSTILE = {
    '"[" x 100,000': "[" * 100_000,
    '"[" x 300,000': "[" * 300_000,
}


def _highlight_any(code, language, attrs):
    """The renderer before the bound: any lexer Pygments knows."""
    try:
        lexer = get_lexer_by_name(language.strip())
    except ClassNotFound:
        return ""
    return f'<pre class="highlight"><code>{highlight(code, lexer, HtmlFormatter(nowrap=True))}</code></pre>\n'


_unbounded_md = (
    MarkdownIt("js-default", {"highlight": _highlight_any})
    .enable("table")
    .enable("strikethrough")
    .use(tasklists_plugin)
)


def _unbounded_render(text: str) -> str:
    return nh3.clean(
        _unbounded_md.render(text),
        tags=markdown._tags,
        attributes=markdown._attributes,
        set_tag_attribute_values=markdown._forced,
        link_rel="noopener noreferrer nofollow",
    )


def _seconds(function, repeat=1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    print(f"== renderers (bounded at {markdown.RENDER_SECONDS:g} s and {markdown.RENDER_MAX_CHARS:,} characters)")
    for name, text in HOSTILE.items():
        unbounded = _seconds(partial(_unbounded_render, text))
        bounded = _seconds(partial(markdown.markdown_render, text))
        print(f"{name:18} unbounded {unbounded:7.2f} s  bounded {bounded:6.2f} s  ({unbounded / bounded:5.1f}x)")

    unbounded = _seconds(lambda: _unbounded_render(ANSWER), repeat=5)
    bounded = _seconds(lambda: markdown.markdown_render(ANSWER), repeat=5)
    print(
        f"5,000-token answer unbounded {unbounded * 1000:6.1f} ms  bounded {bounded * 1000:6.1f} ms  ({bounded / unbounded:.2f}x the time)"
    )

    lexer = get_lexer_by_name("python")
    formatter = HtmlFormatter(cssclass="highlight")
    unbounded = _seconds(lambda: highlight(PYTHON_FILE, lexer, formatter), repeat=3)
    bounded = _seconds(lambda: markdown.code_render(PYTHON_FILE, content_type="text/x-python"), repeat=3)
    print(
        f"200 KB Python file unbounded {unbounded * 1000:6.1f} ms  bounded {bounded * 1000:6.1f} ms  ({bounded / unbounded:.2f}x the time)"
    )

    mcschema = get_lexer_by_name("mcschema")
    first = _seconds(lambda: list(itertools.islice(mcschema.get_tokens("<!--"), 300_000)))
    bounded = _seconds(lambda: markdown.markdown_render("```mcschema\n<!--\n```"))
    print(
        f"mcschema '<!--'    unbounded never ends ({first:.2f} s for its first 300,000 empty tokens)  bounded {bounded * 1000:.2f} ms"
    )


if __name__ == "__main__":
    from setup_django import setup

    setup()
    main()
