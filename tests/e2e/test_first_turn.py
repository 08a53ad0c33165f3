"""A first turn seen from the browser: sign in, ask, watch the answer stream in."""

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests import waits
from tests.e2e.watch import watch_of
from tests.model_server import Text

pytestmark = pytest.mark.e2e

QUESTION = "What does the portal do while the model is still writing?"
LAST_SENTENCE = "Last word: zebra."
ANSWER = (
    "## Streaming check\n\n"
    "The portal streams this answer in **small pieces**, one chunk at a time, "
    "so the page shows it growing while the model is still writing. "
    "Each piece travels from the worker through the channel layer to the browser.\n\n"
    f"{LAST_SENTENCE}"
)
ANSWER_SELECTOR = "article.turn .bubble.assistant .answer"
# Whether the newest turn's event log holds streamed text yet (Portal.shell).
CHUNK_WRITTEN = (
    "from agents.models import Run, RunEvent; "
    "print(Run.objects.latest('pk').events.filter(type=RunEvent.Type.LLM_CHUNK).exists())"
)
TURN_TIMEOUT = waits.ms(20)  # worker pickup, about 2 s of streaming, completion

# Truthy (the text so far) once the answer shows some text but not its end
# while the turn is still running.
PARTIAL_ANSWER_JS = """([selector, last]) => {
  const answer = document.querySelector(selector);
  if (!answer) return false;
  const text = answer.textContent.trim();
  const running = answer.closest("article").dataset.status === "running";
  return running && text.length > 0 && !text.includes(last) ? text : false;
}"""

# Truthy once the running answer shows `reached` but not yet its end.
PARTIAL_ANSWER_REACHED_JS = """([selector, last, reached]) => {
  const answer = document.querySelector(selector);
  if (!answer) return false;
  const text = answer.textContent;
  return answer.closest("article").dataset.status === "running" && text.includes(reached) && !text.includes(last);
}"""


def sign_in(page, *, portal, user, base_url=None):
    """Signs `user` in, in a session of the page's own, and opens the home page
    at `base_url` (a proxy or nginx in front of `portal`; by default the
    portal itself). The session is made as Django's login() makes it, in the
    portal's shell, which spares every test a password hash and two requests;
    the sign-in form itself is tested in the browser where it is the subject
    (test_composer), and through nginx by sign_in_with_password."""
    base_url = base_url or portal.base_url
    name, key = portal.session_create(username=user.username)
    page.context.add_cookies([{"name": name, "value": key, "url": base_url}])
    page.goto(f"{base_url}/")
    expect(page.locator(".who")).to_have_text(user.username)


def sign_in_with_password(page, *, base_url, user):
    """Signs `user` in by posting the sign-in form, as the browser would post it
    (its CSRF token, its cookies), and opens the home page."""
    # The test's own portal on loopback, behind nginx with a certificate made for the test (tests/deploy).
    with httpx.Client(base_url=base_url, timeout=waits.seconds(10), verify=False) as client:
        client.get("/accounts/login/").raise_for_status()
        answer = client.post(
            "/accounts/login/",
            data={
                "username": user.username,
                "password": user.password,
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
            },
            headers={"Referer": f"{base_url}/accounts/login/"},
        )
        assert answer.status_code == 302, f"{user.username} was not signed in: {answer.status_code}"
        cookies = [{"name": name, "value": value, "url": base_url} for name, value in client.cookies.items()]
    page.context.add_cookies(cookies)
    page.goto(f"{base_url}/")
    expect(page.locator(".who")).to_have_text(user.username)


def ask(page, *, question):
    """Sends `question` from the composer; the page's watch keeps an eye on its turn."""
    if watch := watch_of(page):
        watch.asked(question)
    page.locator("#composer-input").fill(question)
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r"/c/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/$"))


def test_first_turn_streams_the_answer(portal, model_server, page, screenshot):
    model_server.add(Text(ANSWER, chunk_size=6, delay=0.05))
    sign_in(page, portal=portal, user=portal.users[0])

    ask(page, question=QUESTION)

    partial = page.wait_for_function(PARTIAL_ANSWER_JS, arg=[ANSWER_SELECTOR, LAST_SENTENCE], timeout=TURN_TIMEOUT)
    partial_text = partial.json_value()
    screenshot(page, name="streaming")
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    answer = page.locator(ANSWER_SELECTOR)
    expect(answer).to_contain_text(LAST_SENTENCE)
    expect(answer.locator("h2")).to_have_text("Streaming check")
    expect(answer.locator("strong")).to_have_text("small pieces")
    final_text = answer.text_content().strip()
    assert len(partial_text) < len(final_text)
    assert "Each piece travels from the worker through the channel layer to the browser." in final_text
    expect(turn.locator(".bubble.user")).to_have_text(QUESTION)
    screenshot(page, name="completed")

    assert len(model_server.requests) == 1
    assert model_server.requests[0]["messages"][-1] == {"role": "user", "content": QUESTION}


def test_another_users_conversation_is_not_found(portal, model_server, new_page, screenshot):
    model_server.add(Text("A private answer."))
    owner = new_page()
    sign_in(owner, portal=portal, user=portal.users[0])
    ask(owner, question="A private question?")
    expect(owner.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    stranger = new_page()
    sign_in(stranger, portal=portal, user=portal.users[1])
    response = stranger.goto(owner.url)

    assert response.status == 404
    screenshot(stranger, name="not-found")


def test_a_reload_mid_turn_shows_the_text_so_far_and_keeps_streaming(portal, model_server, page):
    # About eight seconds of text: the reload comes after the first row (two seconds in) and before the end.
    model_server.add(Text(ANSWER, chunk_size=4, delay=0.12))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Reload while you write?")
    # What a reload renders is what the event log holds, a row every
    # RUN_CHUNK_FLUSH_SECONDS (the page is sent what came after over the
    # socket): the reload comes once the page shows some text and the log has a row of it.
    page.wait_for_function(
        PARTIAL_ANSWER_REACHED_JS, arg=[ANSWER_SELECTOR, LAST_SENTENCE, "one chunk at a time"], timeout=TURN_TIMEOUT
    )
    waits.until(lambda: portal.shell(CHUNK_WRITTEN).strip() == "True", timeout=20)

    page.reload()

    # Rendered by the server from the event log, before any websocket message.
    rendered = page.locator(ANSWER_SELECTOR).text_content()
    assert rendered.strip() and LAST_SENTENCE not in rendered
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    final = page.locator(ANSWER_SELECTOR).text_content()
    assert LAST_SENTENCE in final
    assert _letters(final).startswith(_letters(rendered))
    assert len(model_server.requests) == 1


def _letters(text):
    # The block being written shows as typed (its markdown marks included)
    # until it is finished and rendered.
    return re.sub(r"[\s*#`]", "", text)
