"""The conversation page showing a big artifact (issues 33 and 49): a 5 MB
markdown report and a 19 MB text, against a 2 KB report (the baseline), in
the same run. The server's CPU per view, for the first view of a version
(nothing rendered yet: the cache cleared) and for later ones, and the bytes
sent; then the next page as the reader scrolls to it; then, if Chromium is
installed, the browser's first contentful paint of each, on a portal of its
own (tests/e2e/conftest.portal_running). Targets (issue 49): first paint
<= 1 s, and a view's CPU <= 50 ms and the same whatever the size shown.

Runs on its own (`python benchmarks/large_artifact.py`) or from benchmarks/run.py.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import contextlib
import re
import statistics
import tempfile
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from tests.e2e.seed_pane import big_report, big_text

SEEDS = {
    "2 KB report (baseline)": (big_report, 2 * 1024, "report.md"),
    "5 MB report": (big_report, 5 * 1024 * 1024, "report.md"),
    "19 MB text": (big_text, 19 * 1024 * 1024, "big.txt"),
}
REQUESTS = 15


def _cpu(client, url, *, cold: bool, **headers) -> tuple[float, int]:
    """The median CPU seconds of REQUESTS GETs (each after emptying the cache
    when `cold`), and the bytes of one answer."""
    times, size = [], 0
    for _ in range(REQUESTS):
        if cold:
            cache.clear()
        start = time.process_time()
        response = client.get(url, **headers)
        times.append(time.process_time() - start)
        assert response.status_code == 200, response.status_code
        size = len(response.content)
    return statistics.median(times), size


def _server() -> None:
    user = get_user_model().objects.create_user(username="bench-large", password="x")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    print(f"the conversation page showing an artifact, CPU per view (median of {REQUESTS}):")
    rows = {}
    for label, (seed, size, artifact_id) in SEEDS.items():
        conversation = seed(username=user.username, size=size)
        url = reverse("conversation-detail", args=[conversation]) + f"?artifact={artifact_id}"
        cold, warm = _cpu(client, url, cold=True), _cpu(client, url, cold=False)
        html = client.get(url).content.decode()
        # The next page, as the reader's scrolling asks for it.
        more = re.search(r'hx-get="([^"]+/page/\?version=\d+&amp;start=\d+)"', html)
        following = _cpu(client, more[1].replace("&amp;", "&"), cold=False, HTTP_HX_REQUEST="true") if more else None
        rows[label] = (cold, warm, following)
        print(
            f"  {label + ':':25} first view {cold[0] * 1000:6.1f} ms, later views {warm[0] * 1000:6.1f} ms,"
            f" {warm[1] / 1024:6.1f} KB"
            + (f"; next page {following[0] * 1000:5.1f} ms, {following[1] / 1024:5.1f} KB" if following else "")
        )
    base_cold, base_warm, _ = rows.pop(next(iter(SEEDS)))
    for label, (cold, warm, _) in rows.items():
        print(
            f"  ratio, {label} against the baseline: first view {cold[0] / base_cold[0]:.2f}x,"
            f" later views {warm[0] / base_warm[0]:.2f}x"
        )


def _first_paint() -> None:
    try:
        from playwright.sync_api import sync_playwright

        from tests.browser import CHROMIUM, CHROMIUM_ARGS
        from tests.e2e.conftest import portal_running, template_made
    except ImportError as exc:
        print(f"first paint: skipped ({exc})")
        return
    if not Path(CHROMIUM).exists():
        print(f"first paint: skipped ({CHROMIUM} is missing)")
        return
    with contextlib.ExitStack() as stack:
        template = stack.enter_context(template_made(directory=Path(tempfile.mkdtemp(prefix="bench-template-"))))
        portal = stack.enter_context(
            portal_running(template=template, data_dir=Path(tempfile.mkdtemp(prefix="bench-paint-")))
        )
        user = portal.user_create(prefix="paint")
        urls = {}
        for label, (seed, size, artifact_id) in SEEDS.items():
            code = (
                f"from tests.e2e.seed_pane import {seed.__name__}; "
                f"print({seed.__name__}(username={user.username!r}, size={size}))"
            )
            urls[label] = f"{portal.base_url}/c/{portal.shell(code).strip()}/?artifact={artifact_id}"
        browser = stack.enter_context(sync_playwright()).chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(f"{portal.base_url}/accounts/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill(user.password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{portal.base_url}/")
        print("the browser's first contentful paint (Chromium, 1366x900, median of 3 loads, the first included):")
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
            print(f"  {label + ':':25} {paints[label]:8.0f} ms")
        base = paints.pop(next(iter(SEEDS)))
        for label, paint in paints.items():
            print(f"  ratio, {label} against the baseline: {paint / base:.2f}x (target: <= 1000 ms)")
        browser.close()


def main():
    _server()
    _first_paint()


if __name__ == "__main__":
    main()
