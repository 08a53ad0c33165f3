import uuid

from django.core.cache import cache

from artifactflow.rendered import rendered_key
from artifacts.paging import text_first_page
from artifacts.rendering import page_kind, page_render


def _page(body: str = ""):
    # Text of the test's own: the cache outlives a test, and keys are the text's digest.
    return text_first_page(text=f"# 报告 {uuid.uuid4()}\n\nHeat pumps **work** in the cold.\n\n{body}")


def _key(page, *, content_type="text/markdown", prose=False):
    return rendered_key(text=page.text, kind=page_kind(content_type=content_type, prose=prose))


def test_a_saved_versions_page_is_rendered_once_and_read_back_after():
    page = _page()

    html = page_render(page=page, content_type="text/markdown", prose=False, saved=True)

    assert "<strong>work</strong>" in html and cache.get(_key(page)) == html
    # What is kept is what later views show: nothing renders the page again.
    cache.set(_key(page), "<p>kept</p>")
    assert page_render(page=page, content_type="text/markdown", prose=False, saved=True) == "<p>kept</p>"


def test_the_same_text_shown_another_way_is_another_page():
    page = _page("第一行\n第二行")

    as_markdown = page_render(page=page, content_type="text/markdown", prose=False, saved=True)
    as_text = page_render(page=page, content_type="text/plain", prose=False, saved=True)
    as_prose = page_render(page=page, content_type="text/plain", prose=True, saved=True)

    assert "<h1>" in as_markdown and "<h1>" not in as_text
    assert 'class="prose-text plain-lines"' in as_text and 'class="prose-text"' in as_prose
    keys = {_key(page), _key(page, content_type="text/plain"), _key(page, content_type="text/plain", prose=True)}
    assert len(keys) == 3


def test_a_running_turns_working_copy_is_rendered_every_time_and_never_kept():
    page = _page()

    html = page_render(page=page, content_type="text/markdown", prose=False, saved=False)

    assert "<strong>work</strong>" in html and cache.get(_key(page)) is None
