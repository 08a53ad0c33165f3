import pytest
from django.urls import reverse

from agents.steps import Source


@pytest.mark.parametrize(
    ("url", "passage", "href"),
    [
        ("library://5", "", "/library/5/"),
        ("library://5#2", "", "/library/5/?at=2#passage"),
        # A search hit's snippet marks the words it matched, more closely than its passage's start.
        ("library://5#2", "热泵的效率", "/library/5/?passage=%E7%83%AD%E6%B3%B5%E7%9A%84%E6%95%88%E7%8E%87#passage"),
        ("https://example.org/a#b", "", "https://example.org/a#b"),
        ("javascript:alert(1)", "", ""),
    ],
)
def test_a_source_opens_a_library_passage_at_its_place_and_a_web_page_as_itself(url, passage, href):
    assert reverse("library-document", args=[5]) == "/library/5/"
    assert Source(title="热泵", url=url, passage=passage).href == href


@pytest.mark.parametrize(
    ("url", "href"),
    [
        ("https://example.org/a", "/sources/7/"),
        # A snapshot id planted beside another kind of URL opens nothing.
        ("javascript:alert(1)", ""),
        ("library://5#2", "/library/5/?at=2#passage"),
    ],
)
def test_a_page_web_fetch_kept_opens_its_snapshot(url, href):
    assert Source(title="热泵", url=url, snapshot=7).href == href
