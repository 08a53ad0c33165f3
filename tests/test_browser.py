"""The session's browser (tests/browser.py) leaves the tests after a browser
test free to use the database and event loops of their own. They run in this
order in one process, as a file's tests do."""

import asyncio

import pytest
from django.contrib.auth import get_user_model


def _shown(browser, text: str) -> str:
    """What a page of a new context shows of a paragraph holding `text`."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content(f"<p>{text}</p>")
        return page.text_content("p")
    finally:
        context.close()


def test_a_browser_test_opens_a_page(browser):
    assert _shown(browser, "空气源热泵") == "空气源热泵"


@pytest.mark.django_db
def test_the_next_uses_the_database_and_runs_a_loop_of_its_own():
    get_user_model().objects.create_user(username="after-the-browser")
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"
    assert get_user_model().objects.filter(username="after-the-browser").exists()


async def test_an_async_test_gets_a_loop_of_its_own():
    assert await asyncio.sleep(0, result="ran") == "ran"


def test_a_later_browser_test_still_has_the_browser(browser):
    assert _shown(browser, "second") == "second"
