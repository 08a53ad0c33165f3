"""Sharing seen from two browsers: the owner shares a conversation with a
group, a member reads it live while a turn streams, and loses it the moment
the owner revokes the share."""

import pytest
from playwright.sync_api import expect

from tests.agents.test_engine import call
from tests.e2e.test_first_turn import ANSWER_SELECTOR, TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

TEAM = "热泵研究组"
FIRST_ANSWER = "热泵在冬天**照常**工作，只是效率略低。"
LAST_SENTENCE = "Last word: zebra."
SECOND_ANSWER = (
    "## 第二轮\n\n"
    "The owner's second turn streams to everyone it is shared with, piece by piece, "
    "while the viewer's page offers nothing to change it.\n\n"
    f"{LAST_SENTENCE}"
)
SIZES = [("desktop", 1366, 900), ("phone", 390, 844)]

# Truthy once the viewer's last answer shows some text but not its end, while running.
PARTIAL_JS = """([selector, last]) => {
  const answers = document.querySelectorAll(selector);
  const answer = answers[answers.length - 1];
  if (!answer || answers.length < 2) return false;
  const text = answer.textContent.trim();
  return answer.closest("article").dataset.status === "running" && text.length > 0 && !text.includes(last);
}"""


# POSTs a reader's page could forge: a question, a rename, a share, an artifact upload.
REFUSED_WRITES_JS = """async (url) => {
  const token = JSON.parse(document.body.getAttribute("hx-headers"))["x-csrftoken"];
  const post = (path, fields) => {
    const body = new FormData();
    for (const [name, value] of Object.entries(fields)) body.append(name, value);
    return fetch(url + path, { method: "POST", headers: { "X-CSRFToken": token }, body }).then((r) => r.status);
  };
  return Promise.all([
    post("messages/", { content: "读者的问题" }),
    post("rename/", { title: "读者改的标题" }),
    post("shares/", { audience: "everyone", on: "1" }),
    post("artifacts/", { file: new File(["x"], "x.md") }),
  ]);
}"""


def _shots(page, screenshot, *, name):
    """The page at both sizes, light and dark; back to the desktop's light afterwards."""
    for size, width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            screenshot(page, name=f"{name}-{size}-{scheme}")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.emulate_media(color_scheme="light")


def test_a_group_member_watches_a_shared_turn_live_until_the_owner_revokes(portal, model_server, new_page, screenshot):
    # Users of the test's own: the viewer's fork would join another test's user's list.
    owner, viewer = portal.user_create(prefix="e2e-owner"), portal.user_create(prefix="e2e-viewer")
    portal.shell(
        "from django.contrib.auth.models import Group; from django.contrib.auth import get_user_model; "
        f"team, _ = Group.objects.get_or_create(name={TEAM!r}); "
        # The owner too: a person shares with the groups they are in.
        f"team.user_set.add(*get_user_model().objects.filter(username__in={[owner.username, viewer.username]!r}))"
    )
    owner_page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(owner_page, portal=portal, user=owner)
    model_server.add(Text(FIRST_ANSWER))
    ask(owner_page, question="热泵冬天怎么工作？")
    expect(owner_page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    url = owner_page.url

    owner_page.locator("details.head-menu > summary").click()
    owner_page.locator("#share-panel > summary").click()
    owner_page.locator("#share-group").select_option(label=TEAM)
    owner_page.locator("#share-group").locator("xpath=..").get_by_role("button", name="Add").click()
    shares = owner_page.locator(".share-list li")
    expect(shares).to_have_count(1)
    expect(shares.first).to_contain_text(f"Group: {TEAM}")
    _shots(owner_page, screenshot, name="share-panel")

    viewer_page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(viewer_page, portal=portal, user=viewer)
    shared = viewer_page.locator("#shared-with-me")
    shared.locator("summary").click()
    expect(shared.locator("a")).to_contain_text(owner.username)
    shared.locator("a").click()
    viewer_page.wait_for_url(url)
    expect(viewer_page.locator("#shared-banner")).to_contain_text(owner.username)
    expect(viewer_page.locator(ANSWER_SELECTOR).first).to_contain_text("效率略低")
    for control in ("#composer", "#share-panel", "details.edit", "details.rename", "form.artifact-upload"):
        expect(viewer_page.locator(control)).to_have_count(0)
    expect(viewer_page.get_by_role("button", name="Ask again")).to_have_count(0)

    # Held before its last sentence until the viewer has seen the rest: the
    # partial state lasts as long as the test needs, however busy the machine.
    model_server.add(Text(SECOND_ANSWER, chunk_size=6, delay=0.05, hold=LAST_SENTENCE))
    owner_page.locator("#composer-input").fill("再说一遍？")
    owner_page.get_by_role("button", name="Send").click()
    # The turn reaches the viewer's page while it is still being written: no reload, the socket.
    viewer_page.wait_for_function(PARTIAL_JS, arg=[ANSWER_SELECTOR, LAST_SENTENCE], timeout=TURN_TIMEOUT)
    model_server.release()
    turns = viewer_page.locator("article.turn")
    expect(turns).to_have_count(2)
    expect(turns.last).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(turns.last.locator(".answer")).to_contain_text(LAST_SENTENCE)
    expect(viewer_page.locator("#composer, .message-tools form:not(.fork), form.permission, form.retry")).to_have_count(
        0
    )
    _shots(viewer_page, screenshot, name="viewer")

    # Writes the page does not offer are refused all the same, with the reader's own CSRF token.
    statuses = viewer_page.evaluate(REFUSED_WRITES_JS, url)
    assert statuses == [404, 404, 404, 404], statuses
    expect(turns).to_have_count(2)

    # The reader continues from the first answer in a conversation of their own, in another tab.
    fork_page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(fork_page, portal=portal, user=viewer)
    fork_page.goto(url)
    fork_page.locator("article.turn").first.get_by_role("button", name="Continue from this answer").click()
    fork_page.wait_for_url(lambda address: address != url and "/c/" in address)
    expect(fork_page.locator(".forked-from")).to_contain_text(owner.username)
    expect(fork_page.locator("article.turn")).to_have_count(1)
    expect(fork_page.locator(ANSWER_SELECTOR)).to_contain_text("效率略低")
    expect(fork_page.locator("#composer-input")).to_be_visible()
    expect(fork_page.locator("#shared-banner")).to_have_count(0)
    screenshot(fork_page, name="forked")

    owner_page.locator("details.head-menu > summary").click()
    owner_page.get_by_role("button", name=f"Stop sharing with the group {TEAM}").click()
    expect(owner_page.locator(".share-list li")).to_have_text("Not shared with anyone.")
    # Its socket closed at once (4403): the page says so rather than reconnecting.
    expect(viewer_page.locator("#share-ended")).to_be_visible()
    screenshot(viewer_page, name="no-longer-shared")
    assert viewer_page.goto(url).status == 404


# What the reader's page says of its turn: its text and the labels one hears or hovers.
TURN_WORDS_JS = """() => {
  const turn = document.querySelector("article.turn");
  const labels = [...turn.querySelectorAll("[aria-label], [title]")].map((e) => (e.getAttribute("aria-label") || "") + " " + (e.getAttribute("title") || ""));
  return [turn.innerText, ...labels].join("\\n");
}"""


def test_a_reader_is_told_a_turn_waits_for_the_owners_approval_never_asked_for_theirs(
    portal, model_server, new_page, screenshot
):
    owner, reader = portal.user_create(prefix="e2e-owner"), portal.user_create(prefix="e2e-reader")
    model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999")),
        Text(call("web_fetch", url="library://999")),
        Text("读不到。"),
        Text("完成了。"),
    )
    owner_page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(owner_page, portal=portal, user=owner)
    ask(owner_page, question="读一下那份文件")
    expect(owner_page.locator("form.permission")).to_be_visible(timeout=TURN_TIMEOUT)
    url = owner_page.url
    portal.shell(
        "from conversations.models import Conversation, ConversationShare; "
        f"c = Conversation.objects.get(pk={url.rstrip('/').rsplit('/', 1)[1]!r}); "
        "from django.contrib.auth import get_user_model; "
        f"ConversationShare.objects.create(conversation=c, user=get_user_model().objects.get(username={reader.username!r}))"
    )

    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=reader)
    page.goto(url)
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "waiting_permission")
    for language, owners, yours in (
        ("en", "Waiting for the owner", "your approval"),
        ("zh-hans", "等待所有者批准", "你的批准"),
    ):
        if language != "en":
            page.locator("#language-select").select_option(language)
            expect(page.locator("html")).to_have_attribute("lang", language)
            expect(turn).to_have_attribute("data-status", "waiting_permission")
        expect(turn.locator(".activity")).to_contain_text(owners)
        words = page.evaluate(TURN_WORDS_JS)
        assert yours not in words.lower(), words
        expect(turn.locator("form.permission")).to_have_count(0)
        # Nothing waits for the reader: no count before the tab's title, no mark in their list.
        expect(page.locator("#attention-count")).to_have_attribute("data-count", "0")
        assert not page.title().startswith("(")
        for width, height in ((1366, 900), (1024, 768), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                screenshot(page, name=f"{language}-{width}-{scheme}")
        page.set_viewport_size({"width": 1366, "height": 900})
        page.emulate_media(color_scheme="light")
    owner_page.locator("form.permission").get_by_role("button", name="Deny").click()
