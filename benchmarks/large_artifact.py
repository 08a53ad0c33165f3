"""A large text artifact in the pane (issue 33): the conversation page showing
a 20 MB text upload, against the same page showing a 20 KB one (the
baseline), measured in the same run: the server's time and the bytes sent.
Before paging, the whole text was inlined (rebuilt here by making the first
page the whole text). Then the next page ("Show more"). Then, if Chromium is
installed, the browser's first contentful paint of both pages, on a portal of
its own (tests/e2e/conftest.portal_running). Target: first paint <= 1 s.

Runs on its own (`python benchmarks/large_artifact.py`) or from benchmarks/run.py.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from artifacts import paging
from tests.e2e.seed_pane import BIG_LINE, big_text

BIG = 20 * 1024 * 1024
SMALL = 20 * 1024
REQUESTS = 5


def _timed(client, url, *, requests: int = REQUESTS, **headers) -> tuple[float, int]:
    """The median time of `requests` GETs, and the bytes of one answer."""
    times, size = [], 0
    for _ in range(requests):
        start = time.perf_counter()
        response = client.get(url, **headers)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.status_code
        size = len(response.content)
    return statistics.median(times), size


def _whole_text_inlined():
    """The pane as it was: the whole text as its one page."""
    whole = lambda *, text, size=0: paging.TextPage(text=text, start=0, end=len(text), total=len(text))  # noqa: E731
    return mock.patch("artifacts.pane.text_first_page", whole)


def _server() -> None:
    user = get_user_model().objects.create_user(username="bench-large", password="x")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    big, small = (big_text(username=user.username, size=size) for size in (BIG, SMALL))
    page = {
        key: reverse("conversation-detail", args=[cid]) + "?artifact=big.txt"
        for key, cid in (("big", big), ("small", small))
    }
    print(f"the conversation page showing a text artifact (median of {REQUESTS} requests):")
    rows = {
        "20 KB text (baseline)": _timed(client, page["small"]),
        "20 MB text, first page": _timed(client, page["big"]),
    }
    with _whole_text_inlined():
        rows["20 MB text, whole (before)"] = _timed(client, page["big"], requests=2)
    for label, (seconds, size) in rows.items():
        print(f"  {label + ':':30} {seconds * 1000:8.1f} ms, {size / 1024:9.1f} KB")
    base, paged, whole = rows.values()
    print(
        f"  ratio, 20 MB paged against baseline: {paged[0] / base[0]:.2f}x the time, {paged[1] / base[1]:.2f}x the bytes"
    )
    print(f"  ratio, before against paged: {whole[0] / paged[0]:.0f}x the time, {whole[1] / paged[1]:.0f}x the bytes")
    first = paging.text_first_page(text="".join(BIG_LINE.format(n=n) for n in range(4000)))
    more = reverse("artifact-page", args=[big, "big.txt"]) + f"?version=1&start={first.end}"
    seconds, size = _timed(client, more, HTTP_HX_REQUEST="true")
    print(f"  Show more (the next page):      {seconds * 1000:8.1f} ms, {size / 1024:9.1f} KB")


def _first_paint() -> None:
    try:
        from playwright.sync_api import sync_playwright

        from tests.e2e.conftest import CHROMIUM, portal_running
    except ImportError as exc:
        print(f"first paint: skipped ({exc})")
        return
    if not Path(CHROMIUM).exists():
        print(f"first paint: skipped ({CHROMIUM} is missing)")
        return
    with contextlib.ExitStack() as stack:
        portal = stack.enter_context(portal_running(data_dir=Path(tempfile.mkdtemp(prefix="bench-paint-"))))
        user = portal.user_create(prefix="paint")
        urls = {}
        for label, size in (("20 KB text (baseline)", SMALL), ("20 MB text", BIG)):
            code = f"from tests.e2e.seed_pane import big_text; print(big_text(username={user.username!r}, size={size}))"
            urls[label] = f"{portal.base_url}/c/{portal.shell(code).strip()}/?artifact=big.txt"
        browser = stack.enter_context(sync_playwright()).chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(f"{portal.base_url}/accounts/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(user.password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{portal.base_url}/")
        print("the browser's first contentful paint (Chromium, 1366x900, median of 3 loads):")
        paints = {}
        for label, url in urls.items():
            times = []
            for _ in range(3):
                page.goto(url)
                page.wait_for_selector("#artifact-pane .artifact-content")
                times.append(
                    page.evaluate("() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN")
                )
            paints[label] = statistics.median(times)
            print(f"  {label + ':':30} {paints[label]:8.0f} ms")
        base, big = paints.values()
        print(f"  ratio: {big / base:.2f}x the baseline (target: 20 MB first paint <= 1000 ms)")
        browser.close()


def main():
    _server()
    _first_paint()


if __name__ == "__main__":
    main()
