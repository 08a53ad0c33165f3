from conversations.markdown import markdown_render


def test_fenced_code_in_a_known_language_is_highlighted_and_escaped():
    html = markdown_render('```python\ndef f():\n    return "<b>"\n```')

    assert html.startswith('<pre class="highlight"><code><span class="k">def</span>')
    assert "&lt;b&gt;" in html and "<b>" not in html


def test_unknown_languages_and_raw_html_stay_plain_text():
    html = markdown_render('```nosuchlang\n<i>x</i>\n```\n\n<span class="k" onclick="x()">raw</span>')

    assert "<pre><code>&lt;i&gt;x&lt;/i&gt;" in html
    assert "<span" not in html and "&lt;span class=\"k\" onclick" in html


def test_hostile_markup_is_inert():
    html = markdown_render('<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))')

    assert "<script" not in html and "<img" not in html and 'href="javascript:' not in html
