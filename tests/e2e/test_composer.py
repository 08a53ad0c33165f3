"""The composer keeps what a person types until the portal accepts it: through
every refusal, a reload, a visit to another conversation and a lost
connection (static/js/app.js, the draft)."""

import pytest
from django.conf import settings
from playwright.sync_api import expect

from conversations.lifecycle import MAX_MESSAGE_LENGTH
from tests.e2e.test_first_turn import TURN_TIMEOUT, sign_in
from tests.model_server import Text

WIDTHS = [1366, 390]
TOO_LONG = "检查点" * (MAX_MESSAGE_LENGTH // 3) + "字" * (MAX_MESSAGE_LENGTH % 3 + 1)


@pytest.fixture
def conversations(portal):
    """Two conversations of the first user's: their pages' URLs."""
    code = (
        "from tests.e2e.seed import long_conversation; "
        f"print(long_conversation(username={portal.users[0].username!r}, turns=1)); "
        f"print(long_conversation(username={portal.users[0].username!r}, turns=1))"
    )
    return [f"{portal.base_url}/c/{pk}/" for pk in portal.shell(code).split()]


def _page(new_page, width, scheme="light"):
    return new_page(viewport={"width": width, "height": 900 if width > 600 else 844}, color_scheme=scheme)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_message_over_the_limit_is_refused_and_the_draft_survives_it_and_a_reload(
    portal, new_page, screenshot, width
):
    assert len(TOO_LONG) == MAX_MESSAGE_LENGTH + 1
    for scheme in ("light", "dark"):
        page = _page(new_page, width, scheme)
        sign_in(page, portal=portal, user=portal.users[0])
        box = page.locator("#composer-input")
        box.fill(TOO_LONG)
        page.get_by_role("button", name="Send").click()

        expect(page.locator("#composer-error")).to_have_text(
            f"A message may have at most {MAX_MESSAGE_LENGTH:,} characters; this one has {len(TOO_LONG):,}. "
            "Shorten it, or upload the long part as a file."
        )
        expect(box).to_have_value(TOO_LONG)
        screenshot(page, name=f"{width}-{scheme}-refused")

        page.reload()
        expect(page.locator("#composer-input")).to_have_value(TOO_LONG)
        page.locator("#composer-input").fill("")


def test_what_is_typed_before_the_scripts_ran_is_the_draft(portal, page):
    """On a slow or busy connection the page shows before its deferred scripts
    run, and a person may type already: that text is the draft too, kept when
    the message is then refused and brought back by a reload."""
    sign_in(page, portal=portal, user=portal.users[0])
    held = []
    page.route("**/js/app.js", lambda route: held.append(route))
    with page.expect_request("**/js/app.js"):
        page.reload(wait_until="commit")
    page.locator("#composer-input").fill(TOO_LONG)
    # app.js was held until now (the calls above handed its request over).
    (app_js,) = held
    app_js.continue_()
    page.unroute("**/js/app.js")
    page.wait_for_load_state("domcontentloaded")
    page.get_by_role("button", name="Send").click()

    expect(page.locator("#composer-error")).to_contain_text(f"this one has {len(TOO_LONG):,}")
    page.reload()
    expect(page.locator("#composer-input")).to_have_value(TOO_LONG)
    page.locator("#composer-input").fill("")


def test_each_conversation_keeps_its_own_draft_until_it_is_sent(portal, model_server, page, conversations):
    first, second = conversations
    sign_in(page, portal=portal, user=portal.users[0])
    page.goto(first)
    page.locator("#composer-input").fill("A 的草稿: what about heat pumps?")
    page.goto(second)
    expect(page.locator("#composer-input")).to_have_value("")
    page.locator("#composer-input").fill("B's draft")

    page.goto(first)
    expect(page.locator("#composer-input")).to_have_value("A 的草稿: what about heat pumps?")
    model_server.add(Text("Heat pumps work."))
    page.get_by_role("button", name="Send").click()
    expect(page.locator("article.turn").last).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(page.locator("#composer-input")).to_have_value("")

    page.reload()
    expect(page.locator("#composer-input")).to_have_value("")
    page.goto(second)
    expect(page.locator("#composer-input")).to_have_value("B's draft")


@pytest.mark.watch_allows("htmx:responseError", "htmx:sendError")
@pytest.mark.parametrize(
    ("failure", "said"),
    [
        ("unreachable", "could not be reached"),
        ("500", "failed to take your message"),
        ("403", "open too long to send from"),
    ],
)
def test_a_send_that_fails_keeps_the_draft_and_says_why(portal, page, conversations, failure, said):
    sign_in(page, portal=portal, user=portal.users[0])
    page.goto(conversations[0])

    def fail(route):
        if failure == "unreachable":
            route.abort("connectionrefused")
        elif failure == "500":
            route.fulfill(status=500, body="<h1>Server Error</h1>", content_type="text/html")
        else:
            # As Django answers a POST whose CSRF token went stale.
            route.fulfill(status=403, body="<h1>Forbidden (403)</h1>", content_type="text/html")

    page.route("**/messages/", fail)
    page.locator("#composer-input").fill("Keep me: 请保留这段话。")
    page.get_by_role("button", name="Send").click()

    expect(page.locator("#composer-error")).to_contain_text(said)
    expect(page.locator("#composer-input")).to_have_value("Keep me: 请保留这段话。")
    page.unroute("**/messages/")
    page.reload()
    expect(page.locator("#composer-input")).to_have_value("Keep me: 请保留这段话。")


def test_a_send_after_the_session_ended_keeps_the_draft_through_signing_in(portal, page, conversations):
    sign_in(page, portal=portal, user=portal.users[0])
    # The page refreshes its artifact pane once its websocket opens; that request,
    # made after the session ended, would go to sign in before Send could.
    with page.expect_response(lambda response: response.url.endswith("/artifacts/")):
        page.goto(conversations[0])
    page.locator("#composer-input").fill("Written before lunch.")
    # The session ends (it expired, or was signed out elsewhere); the CSRF cookie stays, as it does.
    page.context.clear_cookies(name=settings.SESSION_COOKIE_NAME)

    page.get_by_role("button", name="Send").click()

    page.wait_for_url("**/accounts/login/**")
    page.get_by_label("Username").fill(portal.users[0].username)
    page.get_by_label("Password").fill(portal.users[0].password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(conversations[0])
    expect(page.locator("#composer-input")).to_have_value("Written before lunch.")


def test_signing_out_leaves_no_draft_for_the_next_person(portal, page):
    sign_in(page, portal=portal, user=portal.users[0])
    page.locator("#composer-input").fill("Private: 薪资调整方案")
    page.locator(".user-menu > summary").click()
    page.get_by_role("button", name="Sign out").click()

    sign_in(page, portal=portal, user=portal.users[1])
    expect(page.locator("#composer-input")).to_have_value("")
    stored = page.evaluate("Object.keys(localStorage).filter((key) => key.startsWith('artifactflow.draft.'))")
    assert stored == []
