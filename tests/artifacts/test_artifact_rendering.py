import lxml.html
from django.urls import reverse

from artifacts.templatetags.artifact_rendering import render_artifact


def test_a_text_file_renders_as_paragraphs_with_no_code_block():
    html = render_artifact("会议纪要：" * 100 + "\n\n第二段。", "text/plain")

    page = lxml.html.fragment_fromstring(html)
    # No <pre>: static/js/copy.js gives every <pre> a Copy code button, and a note is no code.
    assert "<pre" not in html and len(page.xpath("//p")) == 2


def test_code_keeps_its_code_block():
    assert render_artifact("def f(): pass", "text/x-python").startswith('<div class="highlight"><pre>')


def test_a_report_s_library_source_is_a_link_to_the_document():
    html = render_artifact("## 资料中的相关内容\n\n### 热泵手册\n\n来源：library://9\n\n摘录。", "text/markdown")

    (link,) = lxml.html.fragment_fromstring(html, create_parent="div").iter("a")
    assert (link.text_content(), link.get("href")) == ("library://9", reverse("library-document", args=[9]))
