"""The thread in the browser: permission prompts, cancel, branches, the
activity fold, the conversation list, inert hostile content and a long
thread's pages."""

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests import waits
from tests.agents.test_engine import call
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

HOSTILE = (
    'Look: <script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2"> '
    '[click me](javascript:window.pwned=3) <a href="javascript:window.pwned=4">raw link</a>'
)


def _fetch_turn(model_server, *, answer):
    model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999")),
        Text(call("web_fetch", url="library://999")),
        Text("I could not read it."),
        Text(answer),
    )


def _send(page, question):
    page.locator("#composer-input").fill(question)
    page.get_by_role("button", name="Send").click()


def _wait_for_more_text(page, answer):
    """Until the streaming answer has grown, so its turn was re-rendered."""
    seen = len(answer.inner_text())
    page.wait_for_function(
        "([el, seen]) => el.innerText.length > seen", arg=[answer.element_handle(), seen], timeout=TURN_TIMEOUT
    )


def test_approve_deny_and_cancel(portal, model_server, page, screenshot):
    _fetch_turn(model_server, answer="First done.")
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Read the missing document")

    prompt = page.locator("form.permission")
    expect(prompt).to_contain_text("web_fetch needs your approval", timeout=TURN_TIMEOUT)
    expect(page.locator(".activity").last).to_contain_text("Waiting for your approval")
    # What each agent does stays listed in the answer while the turn works.
    steps = page.locator("article.turn .live-steps")
    expect(steps.locator("span.step-agent").filter(has_text="lead_agent → crawl_agent")).to_have_count(1)
    expect(steps.locator(".step-children .run-step")).to_contain_text("web_fetch")
    expect(prompt).to_contain_text("crawl_agent wants to read library://999")
    expect(prompt).to_contain_text("Its task: Read library://999")
    # One turn at a time: while it runs the composer offers Stop, not Send.
    expect(page.locator("#composer-actions").get_by_role("button", name="Stop")).to_be_visible()
    expect(page.get_by_role("button", name="Send", exact=True)).to_have_count(0)
    screenshot(page, name="permission")
    # The answer is sent once: its buttons are disabled while it is on its way.
    page.evaluate(
        """document.addEventListener("htmx:beforeSend", (event) => {
             const form = event.detail.elt.closest("form.permission");
             if (form) window.permissionButtons = [...form.querySelectorAll("button")].map((button) => button.disabled);
           })"""
    )
    prompt.get_by_role("button", name="Approve").click()
    page.wait_for_function("window.permissionButtons !== undefined")
    assert page.evaluate("window.permissionButtons") == [True, True, True]
    turns = page.locator("article.turn")
    expect(turns.nth(0)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turns.nth(0).locator(".answer")).to_have_text("First done.")
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible()

    _fetch_turn(model_server, answer="Second done without it.")
    _send(page, "Try again")
    expect(page.locator("form.permission")).to_be_visible(timeout=TURN_TIMEOUT)
    page.locator("form.permission").get_by_role("button", name="Deny").click()
    expect(turns.nth(1)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    turns.nth(1).locator(".activity-log summary").click()
    expect(turns.nth(1).locator(".activity-steps")).to_contain_text("you denied it")
    expect(turns.nth(1).locator(".activity-steps")).to_contain_text("lead_agent → crawl_agent")

    model_server.add(Text("A long answer that keeps going " * 40, chunk_size=4, delay=0.05))
    _send(page, "Write at length")
    expect(turns.nth(2)).to_have_attribute("data-status", "running", timeout=TURN_TIMEOUT)
    expect(turns.nth(2).locator(".answer")).to_contain_text("A long answer", timeout=TURN_TIMEOUT)
    turns.nth(2).locator(".activity-log summary").click()
    turns.nth(2).locator(".edit summary").click()
    draft = turns.nth(2).get_by_label("Edit your message")
    draft.fill("A draft typed while it streams")
    _wait_for_more_text(page, turns.nth(2).locator(".answer"))
    expect(turns.nth(2).locator("details.activity-log")).to_have_attribute("open", "")
    expect(turns.nth(2).locator(".activity-body")).to_be_visible()
    expect(draft).to_have_value("A draft typed while it streams")
    expect(draft).to_be_focused()
    # Enter in the composer sends nothing while the turn runs; Stop stops it.
    page.locator("#composer-input").fill("Not yet")
    page.locator("#composer-input").press("Enter")
    page.locator("#composer-actions").get_by_role("button", name="Stop").click()
    expect(turns.nth(2)).to_have_attribute("data-status", "cancelled", timeout=TURN_TIMEOUT)
    # The ended turn keeps the Activity the reader opened, loaded again with its last steps.
    expect(turns.nth(2).locator("details.activity-log")).to_have_attribute("open", "")
    expect(turns.nth(2).locator(".activity-body")).to_be_visible()
    expect(turns).to_have_count(3)
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible()
    expect(page.locator("#composer-input")).to_have_value("Not yet")
    expect(turns.nth(2).locator(".answer")).to_contain_text("A long answer")
    model_server.add(Text("Short this time."))
    turns.nth(2).get_by_role("button", name="Retry").click()
    expect(turns.nth(2)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turns.nth(2).locator(".answer")).to_have_text("Short this time.")


def test_edit_a_message_to_branch_and_switch_back_and_forth(portal, model_server, page, screenshot):
    model_server.add(Text("Answer one."), Text("Answer two."))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="First wording")
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    turn.locator("details.edit summary").click()
    turn.get_by_label("Edit your message").fill("Second wording")
    turn.get_by_role("button", name="Send as a new branch").click()

    expect(page.locator("article.turn .bubble.user")).to_have_text("Second wording")
    expect(page.locator("article.turn .answer")).to_have_text("Answer two.", timeout=TURN_TIMEOUT)
    expect(page.locator(".branches")).to_contain_text("2/2")
    screenshot(page, name="branches")
    page.get_by_role("button", name="Previous branch").click()
    expect(page.locator("article.turn .answer")).to_have_text("Answer one.")
    expect(page.locator(".branches")).to_contain_text("1/2")
    page.get_by_role("button", name="Next branch").click()
    expect(page.locator("article.turn .answer")).to_have_text("Answer two.")
    page.reload()
    expect(page.locator("article.turn .bubble.user")).to_have_text("Second wording")

    page.get_by_role("button", name="Artifacts").click()
    expect(page.locator("#artifact-pane")).to_be_hidden()
    page.reload()
    expect(page.locator("#artifact-pane")).to_be_hidden()
    page.get_by_role("button", name="Artifacts").click()
    expect(page.locator("#artifact-pane")).to_be_visible()


def test_search_rename_and_delete_conversations(portal, model_server, page):
    model_server.add(Text("Noted."), Text("Also noted."))
    sign_in(page, portal=portal, user=portal.users[1])
    ask(page, question="Aardvark habitats")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    page.goto(f"{portal.base_url}/")
    ask(page, question="Zebra stripes")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    items = page.locator("#conversation-items ul > li")
    page.get_by_label("Search conversations").fill("aardvark")
    expect(items).to_have_count(1)
    # The title, then where the search matched.
    expect(items).to_contain_text("Aardvark habitats")
    expect(items.locator("mark")).to_have_text("Aardvark")
    page.get_by_label("Search conversations").fill("")
    expect(items).to_have_count(2)

    page.locator("details.head-menu > summary").click()
    page.locator("details.rename summary").click()
    page.get_by_label("Title").fill("Stripes, renamed")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#conversation-head h1")).to_have_text("Stripes, renamed")
    expect(page.locator("#conversation-items")).to_contain_text("Stripes, renamed")

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("details.head-menu > summary").click()
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url(f"{portal.base_url}/")
    expect(items).to_have_count(1)
    # Its mark may say it ended since last looked at: the page left as it ended, before saying it saw the end.
    expect(items.locator(".conversation-title")).to_have_text("Aardvark habitats")


def test_hostile_answers_and_artifacts_render_inert(portal, model_server, page):
    model_server.add(
        Text(call("create_artifact", id="evil.md", content=HOSTILE)),
        Text(HOSTILE),
    )
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Say something hostile")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    page.locator("#artifact-pane .artifact-switcher summary").click()
    page.locator("#artifact-pane").get_by_role("link", name="evil.md").click()
    expect(page.locator("#artifact-pane .artifact-content")).to_contain_text("Look:")

    for scope in ("article.turn .answer", "#artifact-pane .artifact-content"):
        area = page.locator(scope)
        expect(area).to_contain_text("click me")
        assert area.locator("script").count() == 0
        assert area.locator("[onerror]").count() == 0
        assert area.locator("a[href^='javascript']").count() == 0
    assert page.evaluate("window.pwned") is None and dialogs == []


def test_at_phone_width_in_dark_mode_the_page_fits_and_the_keyboard_sends(portal, model_server, new_page, screenshot):
    page = new_page(viewport={"width": 390, "height": 844}, color_scheme="dark", has_touch=True)
    model_server.add(Text("Two lines received."))
    sign_in(page, portal=portal, user=portal.users[0])

    box = page.locator("#composer-input")
    box.fill("First line")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    expect(box).to_have_value("First line\nsecond line")
    box.press("Enter")
    page.wait_for_url(f"{portal.base_url}/c/**")
    expect(page.locator("article.turn .answer")).to_have_text("Two lines received.", timeout=TURN_TIMEOUT)
    screenshot(page, name="phone-dark")

    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(22, 24, 28)"
    # One column: the thread is as wide as the screen, less its padding.
    width = page.locator("#thread").bounding_box()["width"]
    assert width >= 350, width


RETRIED_AS_BRANCH = "Tried again as a new branch; your later turns stay on the branch you came from."


@pytest.mark.parametrize("width", [1366, 390])
def test_retrying_an_old_cancelled_turn_starts_a_branch_and_leaves_the_newest_turn_as_it_was(
    portal, model_server, new_page, screenshot, width
):
    model_server.add(
        Text(call("create_artifact", id="report", title="Report", content="# Report\n\nTurn 1's draft.")),
        Text("A long answer that keeps going " * 40, chunk_size=4, delay=0.05),
        Text(call("rewrite_artifact", id="report", content="# Report\n\nTurn 2's report.")),
        Text("Rewritten for a flat."),
    )
    page = new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Write the report")
    turns = page.locator("article.turn")
    expect(turns.nth(0).locator(".answer")).to_contain_text("A long answer", timeout=TURN_TIMEOUT)
    page.locator("#composer-actions").get_by_role("button", name="Stop").click()
    expect(turns.nth(0)).to_have_attribute("data-status", "cancelled", timeout=TURN_TIMEOUT)
    _send(page, "Rewrite it for a flat")
    expect(turns.nth(1)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    pane = page.locator("#artifact-pane")
    expect(pane.locator(".artifact-content")).to_have_text("Report\nTurn 2's report.", timeout=TURN_TIMEOUT)
    # What turn 2's branch shows; the history under it lists other branches' versions too.
    shown = ".artifact-list, .artifact-head, .artifact-content"
    newest_pane = pane.locator(shown).all_inner_texts()

    # The retried turn saves its report while the retry's answer is on its way, as
    # a quick worker and a slow connection have it: the answer, rendered before the
    # save, brings the new branch's pane without the report, after the change's
    # signal came and its refresh was made for the pane the answer then replaces.
    model_server.add(
        Text(
            call("create_artifact", id="report", title="Report", content="# Report\n\nThe retried report."),
            hold="<tool_call>",
        ),
        Text("Done again."),
    )
    held = []
    page.route("**/retry/", lambda route: held.append(route))
    with page.expect_request("**/retry/"):
        turns.nth(0).get_by_role("button", name="Retry").click()
    expect(turns.nth(0).locator("form.retry")).to_have_class(re.compile(r"\bhtmx-request\b"))
    assert len(held) == 1
    answer = held[0].fetch()
    assert "The retried report" not in answer.text()
    model_server.release()
    expect(pane.locator(".artifact-content")).to_have_text("Report\nThe retried report.", timeout=TURN_TIMEOUT)
    # The person goes on writing meanwhile: neither the answer nor the pane's refresh touches it.
    draft = "接下来：比较两个版本的报告"
    page.locator("#composer-input").fill(draft)
    held[0].fulfill(response=answer)
    page.unroute("**/retry/")

    notice = page.locator("#thread .thread-notice")
    expect(notice).to_have_text(RETRIED_AS_BRANCH)
    expect(turns).to_have_count(1)
    expect(turns.nth(0).locator(".branches")).to_contain_text("2/2")
    expect(turns.nth(0)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turns.nth(0).locator(".answer")).to_have_text("Done again.")
    expect(pane.locator(".artifact-content")).to_have_text("Report\nThe retried report.", timeout=TURN_TIMEOUT)
    expect(page.locator("#composer-input")).to_have_value(draft)
    expect(notice).to_be_visible()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        screenshot(page, name=f"{width}-notice-{scheme}")
    page.emulate_media(color_scheme="light")

    page.get_by_role("button", name="Previous branch").click()
    expect(turns).to_have_count(2)
    expect(notice).to_have_count(0)
    expect(turns.nth(1).locator(".answer")).to_have_text("Rewritten for a flat.")
    expect(turns.nth(0)).to_contain_text("Tried again as a new branch beside this one.")
    expect(turns.nth(0).get_by_role("button", name="Retry")).to_have_count(0)
    expect(pane.locator(".artifact-content")).to_have_text("Report\nTurn 2's report.")
    assert pane.locator(shown).all_inner_texts() == newest_pane
    screenshot(page, name=f"{width}-back")


def test_a_branch_switched_away_from_while_it_streams_sends_the_page_nothing_it_cannot_place(
    portal, model_server, new_page
):
    """Its pushes go on reaching the page; none lands (the watch fails the test on an
    out-of-band swap without a target), and its branch, shown again, has the whole answer."""
    model_server.add(
        Text("A long answer that keeps going " * 40, chunk_size=4, delay=0.05),
        Text("The newest turn's answer."),
        Text("分支上的回答，" * 30 + "写完了。", chunk_size=4, delay=0.02, hold="写完了"),
    )
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Write the report")
    turns = page.locator("article.turn")
    expect(turns.nth(0).locator(".answer")).to_contain_text("A long answer", timeout=TURN_TIMEOUT)
    page.locator("#composer-actions").get_by_role("button", name="Stop").click()
    expect(turns.nth(0)).to_have_attribute("data-status", "cancelled", timeout=TURN_TIMEOUT)
    _send(page, "Go on")
    expect(turns.nth(1)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    turns.nth(0).get_by_role("button", name="Retry").click()
    expect(turns.nth(0).locator(".answer")).to_contain_text("分支上的回答", timeout=TURN_TIMEOUT)
    page.get_by_role("button", name="Previous branch").click()
    expect(turns).to_have_count(2)
    model_server.release()
    # The retried turn ends while the page shows the other branch: its last pushes come here.
    waits.until(lambda: "写完了" in "".join(piece for _, piece in model_server.sent), timeout=20)
    expect(turns.nth(1).locator(".answer")).to_have_text("The newest turn's answer.")

    page.get_by_role("button", name="Next branch").click()
    expect(turns).to_have_count(1)
    expect(turns.nth(0)).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turns.nth(0).locator(".answer")).to_contain_text("写完了。")


@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_retrying_a_turn_deep_in_a_long_thread_brings_its_notice_into_view(
    portal, model_server, new_page, screenshot, width, height
):
    username = portal.users[0].username
    code = (
        "from agents.models import Run; from tests.e2e.seed import long_conversation; "
        f"conversation = long_conversation(username={username!r}, turns=40); "
        "Run.objects.filter(message__conversation_id=conversation, message__content__startswith='Question 30:')"
        ".update(status=Run.Status.CANCELLED); print(conversation)"
    )
    url = f"{portal.base_url}/c/{portal.shell(code).strip()}/"
    page = new_page(viewport={"width": width, "height": height})
    sign_in(page, portal=portal, user=portal.users[0])
    page.goto(url)
    turns = page.locator("article.turn")
    expect(turns).to_have_count(settings.THREAD_PAGE_TURNS)
    model_server.add(Text("Done again."))

    # The reader scrolled up to the cancelled turn to retry it.
    retry = turns.filter(has_text="Question 30:").get_by_role("button", name="Retry")
    retry.scroll_into_view_if_needed()
    retry.click()

    # The page shows the new branch's newest turns, ending with the retried one.
    expect(turns.last).to_contain_text("Question 30:")
    expect(turns).to_have_count(settings.THREAD_PAGE_TURNS)
    notice = page.locator(".thread-notice")
    expect(notice).to_be_in_viewport()
    expect(turns.last.locator(".answer")).to_have_text("Done again.", timeout=TURN_TIMEOUT)
    expect(notice).to_be_in_viewport()
    screenshot(page, name=f"long-thread-{width}")

    # A question sent next is about what follows: the notice goes.
    model_server.add(Text("And after."))
    _send(page, "What next?")
    expect(notice).to_have_count(0)
    expect(turns.last.locator(".answer")).to_have_text("And after.", timeout=TURN_TIMEOUT)


# A question's top, relative to the thread's box: where the reader sees it.
_TOP_IN_THREAD = "(turn, thread) => turn.getBoundingClientRect().top - thread.getBoundingClientRect().top"


@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_a_long_thread_loads_older_turns_above_the_reader_without_moving_and_a_send_adds_one_turn(
    portal, model_server, new_page, screenshot, width, height
):
    page_turns = settings.THREAD_PAGE_TURNS
    code = f"from tests.e2e.seed import long_conversation; print(long_conversation(username={portal.users[0].username!r}, turns=200))"
    url = f"{portal.base_url}/c/{portal.shell(code).strip()}/"
    page = new_page(viewport={"width": width, "height": height})
    sign_in(page, portal=portal, user=portal.users[0])
    held = []
    page.route("**/turns/?before=*", lambda route: held.append(route))
    page.goto(url)
    thread = page.locator("#thread")
    turns = page.locator("article.turn")
    page.wait_for_function(
        "() => { const t = document.getElementById('thread'); return t.scrollHeight - t.scrollTop - t.clientHeight < 2; }"
    )
    expect(turns).to_have_count(page_turns)
    expect(turns.first).to_contain_text(f"Question {201 - page_turns}:")
    expect(turns.last).to_contain_text("Question 200:")

    # The reader scrolls to the top: the loader comes into view and asks for the turns before.
    thread.evaluate("t => { t.scrollTop = 0; }")
    expect(page.locator(".older-turns.htmx-request")).to_be_in_viewport()
    oldest = turns.first.element_handle()
    seen = oldest.evaluate(_TOP_IN_THREAD, thread.element_handle())
    screenshot(page, name=f"{width}-loading-older")
    assert len(held) == 1
    held[0].continue_()
    expect(turns).to_have_count(2 * page_turns)
    expect(turns.first).to_contain_text(f"Question {201 - 2 * page_turns}:")
    # What the reader saw stays where it was: the older turns went in above it.
    assert abs(oldest.evaluate(_TOP_IN_THREAD, thread.element_handle()) - seen) < 1
    expect(page.locator(".older-turns")).not_to_be_in_viewport()
    page.unroute("**/turns/?before=*")

    # Sending adds the new turn alone: every turn on the page stays the element it was.
    turns.evaluate_all("turns => turns.forEach((turn) => { turn.dataset.kept = 'yes'; })")
    model_server.add(Text("One more answer."))
    _send(page, "And one more?")
    expect(turns).to_have_count(2 * page_turns + 1)
    expect(turns.last.locator(".answer")).to_have_text("One more answer.", timeout=TURN_TIMEOUT)
    expect(page.locator("article.turn[data-kept]")).to_have_count(2 * page_turns)
    expect(turns.last).to_be_in_viewport()


def test_a_link_to_an_old_message_opens_on_it_even_in_the_form_without_its_query(portal, page):
    code = (
        "from conversations.models import Message; from tests.e2e.seed import long_conversation; "
        f"conversation = long_conversation(username={portal.users[0].username!r}, turns=60); "
        "print(conversation, Message.objects.get(conversation_id=conversation, content__startswith='Question 5:').pk)"
    )
    conversation, message = portal.shell(code).split()
    sign_in(page, portal=portal, user=portal.users[0])
    # A link made before the thread came in pages names the message only in its fragment.
    page.goto(f"{portal.base_url}/c/{conversation}/#message-{message}")
    page.wait_for_url(f"**/c/{conversation}/?message={message}#message-{message}")
    linked = page.locator(f"#message-{message}")
    expect(linked).to_contain_text("Question 5:")
    expect(linked.locator(".bubble.user")).to_be_in_viewport()
    expect(page.locator("article.turn")).to_have_count(56)


# Scrolls the thread to its top and, before the browser reports that scroll,
# signals a swap of `selector` as the page's socket does; returns where the
# thread is then.
_SWAP_RIGHT_AFTER_SCROLL_JS = """(selector) => {
  const thread = document.getElementById("thread");
  thread.scrollTop = 0;
  const target = document.querySelector(selector);
  target.dispatchEvent(new CustomEvent("htmx:oobAfterSwap", { bubbles: true, detail: { target } }));
  return thread.scrollTop;
}"""


# The reader back at the newest text, once the page has seen the scroll (it is
# handled before the next frame is drawn): the thread follows again.
_BACK_AT_THE_NEWEST_JS = """() => new Promise((done) => {
  const thread = document.getElementById("thread");
  thread.scrollTop = thread.scrollHeight;
  requestAnimationFrame(() => requestAnimationFrame(done));
})"""


def test_a_push_beside_the_thread_does_not_undo_a_scroll_up(portal, new_page):
    code = f"from tests.e2e.seed import long_conversation; print(long_conversation(username={portal.users[0].username!r}, turns=30))"
    url = f"{portal.base_url}/c/{portal.shell(code).strip()}/"
    page = new_page()
    sign_in(page, portal=portal, user=portal.users[0])
    page.goto(url)
    page.wait_for_function(
        "() => { const t = document.getElementById('thread'); return t.scrollHeight - t.scrollTop - t.clientHeight < 2; }"
    )

    # A turn's push follows the newest text while the reader has not scrolled away, as far as the page knows.
    assert page.evaluate(_SWAP_RIGHT_AFTER_SCROLL_JS, "article.turn:last-of-type") > 0
    # The list's mark of the conversation, and the composer's Send the socket sends as it connects,
    # swapped just after the reader scrolled up: the reader stays.
    for beside in ("#conversation-list .run-mark", "#composer-actions"):
        page.evaluate(_BACK_AT_THE_NEWEST_JS)
        assert page.evaluate(_SWAP_RIGHT_AFTER_SCROLL_JS, beside) == 0, beside
