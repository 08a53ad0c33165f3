import logging
import uuid

import pytest

from artifactflow import markdown, rendered
from artifactflow.markdown import markdown_render
from artifactflow.rendered import html_kept


def _text() -> str:
    # Text of the test's own: the cache outlives a test, and keys are the text's digest.
    return f"# 报告 {uuid.uuid4()}\n\nHeat pumps **work** in the cold."


def _counted(calls: list):
    def render(text: str) -> str:
        calls.append(text)
        return markdown_render(text)

    return render


def test_text_is_rendered_the_first_time_and_read_back_after():
    text, calls = _text(), []

    shown = [html_kept(text=text, kind="answer", render=_counted(calls)) for _ in range(3)]

    assert len(calls) == 1 and all("<strong>work</strong>" in html for html in shown)


def test_the_same_text_rendered_another_way_is_kept_apart():
    text, calls = _text(), []

    html_kept(text=text, kind="answer", render=_counted(calls))
    plain = html_kept(text=text, kind="plain", render=lambda text: "<pre>plain</pre>")

    assert plain == "<pre>plain</pre>" and len(calls) == 1


def test_a_render_a_busy_machine_cut_short_is_shown_plain_and_not_kept(monkeypatch):
    text, calls = _text(), []
    monkeypatch.setattr(markdown, "RENDER_SECONDS", -1)

    cut_short = html_kept(text=text, kind="answer", render=_counted(calls))
    monkeypatch.undo()
    whole = html_kept(text=text, kind="answer", render=_counted(calls))

    assert "Too long to format" in cut_short and "<strong>work</strong>" in whole and len(calls) == 2


@pytest.mark.django_db
def test_while_the_cache_is_down_text_still_renders_and_the_outage_is_logged_once(
    disposable_redis, caplog, monkeypatch
):
    monkeypatch.setattr(rendered._cache, "down", False)
    text, calls = _text(), []
    disposable_redis.kill()

    with caplog.at_level(logging.WARNING, logger="artifactflow.rendered"):
        shown = [html_kept(text=text, kind="answer", render=_counted(calls)) for _ in range(3)]

    assert all("<strong>work</strong>" in html for html in shown) and len(calls) == 3
    assert len([record for record in caplog.records if record.name == "artifactflow.rendered"]) == 1
