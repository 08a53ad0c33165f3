import string

import lxml.html
import pytest
from django.urls import reverse
from pygments.lexers import LEXERS, get_lexer_by_name

from artifactflow import markdown
from artifactflow.markdown import code_render, markdown_render, markdown_tokens, passage_mark, text_render
from tests.bounded import computes_within


def test_fenced_code_in_a_known_language_is_highlighted_and_escaped():
    html = markdown_render('```python\ndef f():\n    return "<b>"\n```')

    assert html.startswith('<pre class="highlight"><code><span class="k">def</span>')
    assert "&lt;b&gt;" in html and "<b>" not in html


def test_unknown_languages_and_raw_html_stay_plain_text():
    html = markdown_render('```nosuchlang\n<i>x</i>\n```\n\n<span class="k" onclick="x()">raw</span>')

    assert "<pre><code>&lt;i&gt;x&lt;/i&gt;" in html
    assert "<span" not in html and '&lt;span class="k" onclick' in html


def test_hostile_markup_is_inert():
    html = markdown_render("<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))")

    assert "<script" not in html and "<img" not in html and 'href="javascript:' not in html


def test_task_list_items_are_disabled_checkboxes():
    html = markdown_render("- [ ] search\n- [x] read\n- plain")

    open_item, done_item, plain_item = html.split("<li")[1:]
    for item in (open_item, done_item):
        assert '<input class="task-list-item-checkbox"' in item
        assert 'type="checkbox"' in item and 'disabled="disabled"' in item
    assert "checked" not in open_item.replace("-checkbox", "") and 'checked="checked"' in done_item
    assert plain_item.startswith(">plain</li>")


def test_inputs_can_never_be_live_form_fields():
    html = markdown_render('<input type="text" name="password"> [ ] not an item')

    assert "<input" not in html and "&lt;input" in html


def test_images_are_links_so_no_page_loads_an_address_a_model_chose():
    html = markdown_render(
        "![chart of *sales*](https://evil.example/pixel.png?leak=secret) ![](//evil.example/a.png) "
        "![d](data:image/png;base64,AAAA) [![badge](https://badges.example/b.svg)](https://project.example)"
    )

    assert "<img" not in html
    assert (
        '<a class="image-link" href="https://evil.example/pixel.png?leak=secret" target="_blank" rel="noopener noreferrer nofollow">Image: chart of sales (evil.example)</a>'
        in html
    )
    assert (
        '<a class="image-link" href="//evil.example/a.png" target="_blank" rel="noopener noreferrer nofollow">Image (evil.example)</a>'
        in html
    )
    assert "data:" not in html and "Image: d" in html
    # An image inside a link is that link's text: links do not nest.
    assert (
        '<a href="https://project.example" target="_blank" rel="noopener noreferrer nofollow">Image: badge (badges.example)</a>'
        in html
    )


def test_a_text_file_of_a_known_type_is_highlighted_and_any_other_is_escaped_as_is():
    python = code_render('print("<b>")', content_type="text/x-python")
    unknown = code_render("<b>bold?</b>", content_type="application/x-nothing")

    assert python.startswith('<div class="highlight"><pre>') and "&lt;b&gt;" in python
    assert unknown == '<pre class="plain">&lt;b&gt;bold?&lt;/b&gt;</pre>'


def test_structure_tokens_keep_raw_html_apart_and_task_boxes_only_on_request():
    def inline(tokens):
        return [child.type for token in tokens if token.type == "inline" for child in token.children]

    assert "html_inline" in inline(markdown_tokens("a <b>b</b>"))
    assert inline(markdown_tokens("- [ ] open")) == ["text"]
    assert inline(markdown_tokens("- [ ] open", task_lists=True)) == ["html_inline", "text"]


# What the probe found hanging a thread for good, and shapes close to it: a
# comment opener (mcschema), unclosed strings and comments, deep nesting,
# backslashes, NULs, Chinese, and markdown-it's quadratic cases.
HOSTILE = (
    "<!--",
    "<!--" * 500,
    '"' + "\\" * 2000,
    "/*" * 1000 + "(" * 1000,
    "{[(" * 1000,
    "\x00\ufeff研究报告<%" * 200,
    "#" * 3000 + "\n" + "'''" * 500,
)
# Past the render's time on any machine; the bound is far above RENDER_SECONDS.
HANG_BOUND = 30


def test_a_fence_in_a_lexer_that_never_ends_is_shown_plain_at_once():
    with computes_within(HANG_BOUND):
        html = markdown_render("```mcschema\n<!--\n```")

    assert html == "<pre><code>&lt;!--\n</code></pre>\n"


def test_a_content_type_whose_lexer_never_ends_is_shown_plain_at_once():
    with computes_within(HANG_BOUND):
        html = code_render("<!-- never closed", content_type="text/mcschema")

    assert html == '<pre class="plain">&lt;!-- never closed</pre>'


def test_languages_and_types_outside_the_list_are_plain_and_those_on_it_highlighted():
    assert 'class="k"' not in markdown_render("```mcfunction\ndef f(): pass\n```")
    assert '<span class="k">def</span>' in markdown_render("```Python\ndef f(): pass\n```")
    assert '<span class="k">def</span>' in code_render("def f(): pass", content_type="text/x-python; charset=utf-8")
    assert 'class="highlight"' not in code_render("def f(): pass", content_type="text/x-mcschema")


def test_a_highlighter_that_never_ends_is_stopped_when_the_render_is_out_of_time(monkeypatch):
    # Were mcschema on the list, its endless empty tokens would still stop.
    monkeypatch.setitem(markdown._by_alias, "mcschema", "MCSchema")
    monkeypatch.setattr(markdown, "RENDER_SECONDS", 0.2)

    with computes_within(HANG_BOUND):
        html = markdown_render("Before.\n\n```mcschema\n<!--\n```")

    assert html.startswith('<p class="meta">Too long to format: shown as plain text.</p><pre class="unformatted">')
    assert "Before." in html and "&lt;!--" in html


def test_markdown_too_slow_to_parse_is_shown_plain_and_read_as_paragraphs(monkeypatch):
    # 20,000 "[" take markdown-it seconds: each rescans the rest of the line.
    text = "研究 " + "[" * 20_000
    monkeypatch.setattr(markdown, "RENDER_SECONDS", 0.05)

    html = markdown_render(text)
    tokens = markdown_tokens(text)

    assert html == f'<p class="meta">Too long to format: shown as plain text.</p><pre class="unformatted">{text}</pre>'
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert tokens[1].content == text


def test_text_past_the_size_bound_is_plain_without_being_parsed(monkeypatch):
    monkeypatch.setattr(markdown, "RENDER_MAX_CHARS", 100)
    text = "# Title\n\n<b>" + "x" * 100

    assert markdown_render(text).endswith(f'<pre class="unformatted"># Title\n\n&lt;b&gt;{"x" * 100}</pre>')
    assert code_render("def f(): pass" * 10, content_type="text/x-python").startswith('<pre class="plain">')
    assert [t.type for t in markdown_tokens(text)][:3] == ["paragraph_open", "inline", "paragraph_close"]


# Every name Pygments knows, and those of the lexers on the list: those lex as
# their lexer does, the others all take the plain path; one test checks each.
ALIASES = sorted({alias for _, _, aliases, _, _ in LEXERS.values() for alias in aliases})
MIMETYPES = sorted({m for _, _, _, _, mimetypes in LEXERS.values() for m in mimetypes})
HIGHLIGHTED_ALIASES = sorted({alias for name in markdown.HIGHLIGHTED_LEXERS for alias in LEXERS[name][2]})
HIGHLIGHTED_MIMETYPES = sorted({m for name in markdown.HIGHLIGHTED_LEXERS for m in LEXERS[name][4]})


def test_every_name_on_the_list_highlights_and_every_other_is_shown_plain():
    for alias in HIGHLIGHTED_ALIASES:
        assert markdown_render(f"```{alias}\n<!-- x\n```").startswith('<pre class="highlight"><code>'), alias
    for mimetype in HIGHLIGHTED_MIMETYPES:
        assert code_render("<!-- x", content_type=mimetype).startswith('<div class="highlight">'), mimetype
    for alias in set(ALIASES) - set(HIGHLIGHTED_ALIASES):
        assert markdown_render(f"```{alias}\n<!-- x\n```") == "<pre><code>&lt;!-- x\n</code></pre>\n", alias
    for mimetype in set(MIMETYPES) - set(HIGHLIGHTED_MIMETYPES):
        assert code_render("<!-- x", content_type=mimetype) == '<pre class="plain">&lt;!-- x</pre>', mimetype


# A lexer lexes alike whichever of its names chose it: each lexer on the list once.
@pytest.mark.parametrize("name", sorted(markdown.HIGHLIGHTED_LEXERS))
def test_every_fence_language_on_the_list_renders_hostile_text_within_the_bound(name):
    alias = LEXERS[name][2][0]
    for text in HOSTILE:
        with computes_within(HANG_BOUND):
            html = markdown_render(f"```{alias}\n{text}\n```\n\n```{alias}\n{text}")
        assert "<pre" in html


@pytest.mark.parametrize("name", sorted(name for name in markdown.HIGHLIGHTED_LEXERS if LEXERS[name][4]))
def test_every_content_type_on_the_list_renders_hostile_text_within_the_bound(name):
    mimetype = LEXERS[name][4][0]
    for text in HOSTILE:
        with computes_within(HANG_BOUND):
            html = code_render(text, content_type=mimetype)
        assert html.startswith(("<pre", '<div class="highlight">'))


# Runs of one character after an opener: the inputs on which a lexer's regular
# expressions backtrack exponentially (Scala's strings, on backslashes, took
# 0.15 s at 25 characters and did not end at 50). A lexer failing here cannot
# go on the list: no deadline stops a regular expression inside a thread.
OPENERS = ("", '"', "'", "`", '"""', "/*", "<", "<!--", "(", "{", "[", "#", "$", "@", "\\", "r'", "${", "%", "--", ":")
RUNS = (*string.punctuation, " ", "\t", "a", "0", '\\"', "\\'", "\\\\", " a", "a.", "1.", "\\\n", "\n ")


@pytest.mark.parametrize("name", sorted(markdown.HIGHLIGHTED_LEXERS))
def test_no_highlighted_lexer_backtracks_on_runs_of_one_character(name):
    # The lexer alone, on the text a fence would give it: what a render adds
    # around it (markdown, formatting, sanitising) is bounded by the tests above,
    # and is three quarters of the time of 880 renders a lexer.
    lexer = get_lexer_by_name(LEXERS[name][2][0])
    for opener in OPENERS:
        for run in RUNS:
            with computes_within(HANG_BOUND):
                assert list(lexer.get_tokens(f"{opener}{run * 60}\n"))


# --- Links -----------------------------------------------------------------------


def test_a_library_link_leads_to_the_document_page_and_a_web_link_opens_in_a_new_tab():
    html = markdown_render(
        "见 [热泵手册](library://12) 与 <library://7/>，[web](https://example.org/a) [here](/c/1/) "
        "[bad](library://x) [js](javascript:alert(1))"
    )

    page = lxml.html.fragment_fromstring(html, create_parent="div")
    links = {a.text_content(): (a.get("href"), a.get("target"), a.get("rel")) for a in page.iter("a")}
    rel = "noopener noreferrer nofollow"
    assert links == {
        "热泵手册": (reverse("library-document", args=[12]), None, rel),
        "library://7/": (reverse("library-document", args=[7]), None, rel),
        "web": ("https://example.org/a", "_blank", rel),
        "here": ("/c/1/", None, rel),
        "bad": (None, None, rel),
    }
    # markdown-it refuses the javascript: link: it stays text.
    assert "[js](javascript:alert(1))" in page.text_content()


def test_a_library_url_in_running_text_is_a_link_but_not_in_code_or_inside_a_link():
    html = markdown_render(
        "来源：library://9。\n\n- Source: library://12/\n\n`library://4` [见 library://3](library://3) "
        "xlibrary://6 library://7x\n\n```\nlibrary://5\n```"
    )

    page = lxml.html.fragment_fromstring(html, create_parent="div")
    links = [(a.text_content(), a.get("href"), a.get("rel")) for a in page.iter("a")]
    rel = "noopener noreferrer nofollow"
    assert links == [
        ("library://9", reverse("library-document", args=[9]), rel),
        ("library://12/", reverse("library-document", args=[12]), rel),
        ("见 library://3", reverse("library-document", args=[3]), rel),
    ]
    assert page.xpath("//p")[0].text_content() == "来源：library://9。"
    assert [code.text_content() for code in page.iter("code")] == ["library://4", "library://5\n"]
    assert "xlibrary://6 library://7x" in page.text_content()


def test_a_library_passage_link_opens_its_document_at_the_passage():
    html = markdown_render("见 [热泵手册，第 3 段](library://12#3)；来源：library://9#14。library://9#x")

    page = lxml.html.fragment_fromstring(html, create_parent="div")
    links = [(a.text_content(), a.get("href")) for a in page.iter("a")]
    assert links == [
        ("热泵手册，第 3 段", reverse("library-document", args=[12]) + "?at=3#passage"),
        ("library://9#14", reverse("library-document", args=[9]) + "?at=14#passage"),
        # No passage number: the document.
        ("library://9", reverse("library-document", args=[9])),
    ]
    assert "library://9#x" in page.text_content()


def test_plain_text_is_paragraphs_that_keep_their_line_breaks_not_a_code_block():
    html = text_render("第一段很长，" * 80 + "\n第二行 <b>\n\n\n  缩进的段落，来源：library://9\n")

    page = lxml.html.fragment_fromstring(html)
    assert "<pre" not in html and "<b>" not in html
    assert page.get("class") == "prose-text plain-lines"
    assert [p.text_content() for p in page.iter("p")] == [
        "第一段很长，" * 80 + "\n第二行 <b>",
        "  缩进的段落，来源：library://9",
    ]
    (link,) = page.iter("a")
    assert (link.get("href"), link.get("rel")) == (
        reverse("library-document", args=[9]),
        "noopener noreferrer nofollow",
    )


def test_a_pdf_s_text_joins_its_lines_into_paragraphs():
    html = text_render("A line the page\nbroke.\n\nNext.", lines_joined=True)

    assert html == '<div class="prose-text"><p>A line the page broke.</p><p>Next.</p></div>'


# --- Marking a passage ---------------------------------------------------------------


def test_a_passage_is_marked_across_emphasis_and_links_the_first_mark_to_scroll_to():
    html = markdown_render("# 热泵\n\n空气源热泵的**效率**用 [COP](https://example.org) 衡量。\n\nOther text.")

    marked, found = passage_mark(html, "热泵的**效率**用 COP 衡量 …")

    page = lxml.html.fragment_fromstring(marked, create_parent="div")
    marks = page.xpath("//mark")
    assert found and [mark.get("id") for mark in marks] == ["passage", None, None, None, None]
    assert "".join(mark.text_content() for mark in marks) == "热泵的效率用 COP 衡量"
    assert page.xpath("//strong/mark") and page.xpath("//a[@target='_blank']/mark")


@pytest.mark.parametrize(
    "passage", ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "\x00", "", "…", "no such words here"]
)
def test_a_passage_adds_nothing_but_a_mark(passage):
    html = markdown_render("A text about <b>heat</b> & pumps: script alert img.")

    marked, found = passage_mark(html, passage)

    assert "<script" not in marked and "<img" not in marked and "onerror" not in marked
    assert marked == html and not found


def test_the_longest_piece_of_a_passage_the_text_shows_is_marked():
    html = markdown_render("Heat pumps move heat from outside air.\n\nA different paragraph entirely.")

    marked, found = passage_mark(html, "Heat pumps move heat … words the text lacks … A different paragraph")

    assert found and '<mark id="passage">A different paragraph</mark>' in marked


def test_a_citation_links_to_its_source_with_the_words_it_quotes():
    html = markdown_render(
        "Homes stayed “at 20 °C <down> to −15 °C” [1]. 价格为“每千瓦一千二百元”。[2] Both [1, 2]; none [3].\n\n"
        "## Sources\n"
        "[1] [Survey](https://survey.example/2026)\n"
        "[2] [热泵手册](library://9#3)\n"
        "[3] [Script](javascript:alert(1))\n"
    )
    page = lxml.html.fragment_fromstring(html, create_parent="div")

    citations = page.xpath("//a[@class='citation']")
    assert [(a.text_content(), a.get("title"), a.get("data-quote")) for a in citations] == [
        ("[1]", "Survey", "at 20 °C <down> to −15 °C"),
        ("[2]", "热泵手册", "每千瓦一千二百元"),
        ("[1]", "Survey", None),
        ("[2]", "热泵手册", None),
    ]
    page_url = reverse("library-document", args=[9])
    assert [a.get("href") for a in citations] == [
        "https://survey.example/2026",
        f"{page_url}?at=3&passage=%E6%AF%8F%E5%8D%83%E7%93%A6%E4%B8%80%E5%8D%83%E4%BA%8C%E7%99%BE%E5%85%83#passage",
        "https://survey.example/2026",
        f"{page_url}?at=3#passage",
    ]
    assert citations[0].get("target") == "_blank" and "noopener" in citations[0].get("rel")
    # A source whose link markdown refuses is none: its marker stays text.
    assert "none [3]." in page.text_content() and not page.xpath("//a[contains(@href, 'javascript')]")
    # The sources keep a line each.
    assert len(page.xpath("//h2/following-sibling::p[1]/br")) == 2


def test_a_quotation_spelt_otherwise_is_marked_where_its_words_are():
    html = markdown_render(
        "Homes kept at **20 °C** down to −15 °C outside. 价格为每千瓦一千二百元，比去年下降了百分之八。"
    )

    english, found = passage_mark(html, "at 20 °C, down to -15 °C outside")
    chinese, found_too = passage_mark(html, "每千瓦一千二百元 比去年下降了百分之八")

    page = lxml.html.fragment_fromstring(english, create_parent="div")
    assert found and "".join(mark.text_content() for mark in page.xpath("//mark")) == "at 20 °C down to −15 °C outside"
    page = lxml.html.fragment_fromstring(chinese, create_parent="div")
    assert found_too and page.xpath("//mark")[0].text_content() == "每千瓦一千二百元，比去年下降了百分之八"
    # A snippet with a gap is looked for piece by piece, as before, never as one string of words.
    assert passage_mark(html, "every word … elsewhere")[1] is False
