import logging
import uuid

import pytest
from django.core.cache import cache

from artifactflow import markdown
from artifacts import rendering
from artifacts.paging import text_first_page
from artifacts.rendering import page_key, page_render


def _page(body: str = ""):
    # Text of the test's own: the cache outlives a test, and keys are the text's digest.
    return text_first_page(text=f"# 报告 {uuid.uuid4()}\n\nHeat pumps **work** in the cold.\n\n{body}")


def _key(page, *, content_type="text/markdown", prose=False):
    return page_key(text=page.text, content_type=content_type, prose=prose)


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
    assert (
        len({_key(page), _key(page, content_type="text/plain"), _key(page, content_type="text/plain", prose=True)}) == 3
    )


def test_a_running_turns_working_copy_is_rendered_every_time_and_never_kept():
    page = _page()

    html = page_render(page=page, content_type="text/markdown", prose=False, saved=False)

    assert "<strong>work</strong>" in html and cache.get(_key(page)) is None


def test_a_render_a_busy_machine_cut_short_is_shown_plain_and_not_kept(monkeypatch):
    page = _page()
    monkeypatch.setattr(markdown, "RENDER_SECONDS", -1)

    html = page_render(page=page, content_type="text/markdown", prose=False, saved=True)

    assert "Too long to format" in html and "**work**" in html
    assert cache.get(_key(page)) is None
    monkeypatch.undo()
    assert "<strong>work</strong>" in page_render(page=page, content_type="text/markdown", prose=False, saved=True)


@pytest.mark.django_db
def test_while_the_cache_is_down_pages_still_render_and_the_outage_is_logged_once(
    disposable_redis, caplog, monkeypatch
):
    monkeypatch.setattr(rendering._cache, "down", False)
    page = _page()
    disposable_redis.kill()

    with caplog.at_level(logging.WARNING, logger="artifacts.rendering"):
        shown = [page_render(page=page, content_type="text/markdown", prose=False, saved=True) for _ in range(3)]

    assert all("<strong>work</strong>" in html for html in shown)
    assert len([record for record in caplog.records if record.name == "artifacts.rendering"]) == 1
