"""One headless Chromium per test process, shared by every browser test (a
pytest plugin: tests/conftest.py loads it). Each test gets contexts of its own
from it (tests/e2e/conftest.py new_page), so no cookie or storage crosses tests.

Playwright's sync API runs its event loop in a greenlet of the test's thread,
and between its calls marks that loop as the thread's running one. While it is
marked, Django refuses database work (SynchronousOnlyOperation) and asyncio.run()
and pytest-asyncio refuse to start a loop of their own. So the loop is set aside
after every test, and a test that uses the browser takes it back before its
fixtures are set up; no other test ever calls Playwright.
"""

import asyncio
import os
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests.processes import start_record

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Playwright's loop while its browser is open.
_loop: asyncio.AbstractEventLoop | None = None


def _loop_back() -> None:
    if _loop is not None:
        asyncio._set_running_loop(_loop)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if "browser" in item.fixturenames:
        _loop_back()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        asyncio._set_running_loop(None)


@pytest.fixture(scope="session")
def browser():
    global _loop
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing; .ci/run installs it from Debian's chromium package")
        # A developer machine may lack it; CI never skips.
        pytest.skip(f"browser tests need {CHROMIUM}: apt-get install chromium")
    playwright = sync_playwright().start()
    try:
        _loop = asyncio.get_running_loop()
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        start_record("chromium")
        yield browser
    finally:
        # The session ends in whichever test ran last, which may have set the loop aside;
        # the fixtures torn down after this one may use the database.
        _loop_back()
        playwright.stop()
        _loop = None
        asyncio._set_running_loop(None)
