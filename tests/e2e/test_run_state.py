"""What waits for the person across their conversations, in the browser: the
list's marks and the tab title's count over the page's one websocket, and
each conversation's menu in the list, by keyboard."""

import re

import pytest
from playwright.sync_api import expect

from tests.agents.test_engine import call
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

# Counts the websockets the page opens and how many are still open (or opening).
SOCKETS_JS = """
window.sockets = [];
const Native = window.WebSocket;
window.WebSocket = class extends Native {
  constructor(...args) { super(...args); window.sockets.push(this); }
};
"""
OPEN_SOCKETS = "window.sockets.filter((socket) => socket.readyState <= 1).map((socket) => socket.url)"


def _conversation_id(page) -> str:
    return re.search(r"/c/([0-9a-f-]{36})/$", page.url)[1]


def _one_socket(page, *, path):
    """The page holds exactly one websocket, to `path`, and opened no other.
    Counted in the page itself: Playwright's websocket events reach the test
    later than the page's own state, so they may still name the last page's."""
    page.wait_for_function(f"() => {OPEN_SOCKETS}.length === 1 && window.sockets.length === 1")
    assert page.evaluate(OPEN_SOCKETS)[0].endswith(path)


def _looks(page, screenshot, *, name, then=None):
    """Screenshots at laptop and phone width, light and dark; on a phone the
    list is a drawer, opened first (without its slide, caught halfway else),
    and `then` does again what is to be seen."""
    page.emulate_media(reduced_motion="reduce")
    for width, height in ((1366, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        if width < 1100:
            page.locator(".drawer-toggle").click()
            expect(page.locator("#conversation-list")).to_be_visible()
            page.wait_for_function(
                "() => document.getElementById('conversation-list').getBoundingClientRect().left === 0"
            )
            if then:
                then()
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            screenshot(page, name=f"{name}-{width}-{scheme}")
    page.keyboard.press("Escape")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1366, "height": 900})


def test_a_turn_waiting_for_approval_is_marked_in_the_list_and_counted_in_the_title_of_another_page(
    portal, model_server, new_page, screenshot
):
    # Slow to reach its question, so the mark comes to the other page by its websocket.
    model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999"), chunk_size=8, delay=0.1),
        Text(call("web_fetch", url="library://999")),
        Text("读不到。"),
        Text("完成了。"),
    )
    page = new_page(viewport={"width": 1366, "height": 900})
    page.add_init_script(SOCKETS_JS)
    sign_in(page, portal=portal, user=portal.user_create(prefix="e2e-marks"))
    ask(page, question="读一下那份文件")
    waiting = _conversation_id(page)
    _one_socket(page, path=f"/ws/conversations/{waiting}/")

    page.get_by_role("link", name="New conversation").click()
    page.wait_for_url(f"{portal.base_url}/")
    _one_socket(page, path="/ws/user/")
    mark = page.locator(f"#run-mark-{waiting}")
    expect(mark).to_have_attribute("data-mark", "waiting", timeout=TURN_TIMEOUT)
    expect(mark).to_contain_text("Waiting for your approval")
    expect(page).to_have_title("(1) ArtifactFlow")
    item = page.locator(f'li.conversation-item[data-conversation="{waiting}"] a')
    expect(item).to_have_accessible_name(re.compile(r"Waiting for your approval$"))
    _looks(page, screenshot, name="waiting")

    item.click()
    page.wait_for_url(re.compile(f"/c/{waiting}/$"))
    _one_socket(page, path=f"/ws/conversations/{waiting}/")
    expect(page).to_have_title(re.compile(r"^\(1\) "))
    page.locator("form.permission").get_by_role("button", name="Approve").click()
    expect(page.locator("article.turn").first).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    # Seen here as it ended: no mark, nothing counted.
    expect(page.locator(f"#run-mark-{waiting}")).not_to_have_attribute("data-mark", re.compile(".*"))
    expect(page).not_to_have_title(re.compile(r"^\(\d+\) "))


def _conversations(portal, user, titles):
    """Conversations of `user` with these titles, the first the newest."""
    code = (
        "from django.contrib.auth import get_user_model; from conversations.models import Conversation; "
        "from datetime import timedelta; from django.utils import timezone; "
        f"owner = get_user_model().objects.get(username={user.username!r}); now = timezone.now(); "
        f"made = [Conversation.objects.create(owner=owner, title=t) for t in {titles!r}]; "
        "[Conversation.objects.filter(pk=c.pk).update(updated_at=now - timedelta(minutes=i)) for i, c in enumerate(made)]; "
        "print(' '.join(str(c.pk) for c in made))"
    )
    return portal.shell(code).split()


def _runs(portal, statuses):
    """A turn in each of these conversations, in these states; the ended ones ended just now."""
    code = (
        "from agents.models import Run; from conversations.models import Message; from django.utils import timezone; "
        f"[Run.objects.create(message=Message.objects.create(conversation_id=pk, content='问'), status=status, "
        "finished_at=None if status in Run.ACTIVE_STATUSES else timezone.now()) "
        f"for pk, status in {statuses!r}.items()]"
    )
    portal.shell(code)


def test_the_lists_menu_renames_pins_and_deletes_by_keyboard(portal, new_page, screenshot):
    user = portal.user_create(prefix="e2e-marks")
    newest, running, finished, middle, oldest = _conversations(
        portal, user, ["等待批准", "正在运行", "已经完成", "中间的", "最旧的"]
    )
    _runs(portal, {newest: "waiting_permission", running: "running", finished: "completed"})
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=user)
    page.goto(f"{portal.base_url}/")
    # What waits: the approval and the turn that ended, not the one running.
    expect(page).to_have_title("(2) ArtifactFlow")
    for pk, mark in ((newest, "waiting"), (running, "running"), (finished, "finished")):
        expect(page.locator(f"#run-mark-{pk}")).to_have_attribute("data-mark", mark)

    def item(pk):
        return page.locator(f'li.conversation-item[data-conversation="{pk}"]')

    # Enter opens the menu on its first item; Escape closes it and focus goes back.
    button = item(middle).get_by_role("button", name="Actions for “中间的”")
    button.focus()
    page.keyboard.press("Enter")
    menu = item(middle).get_by_role("menu")
    expect(menu).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(menu.get_by_role("menuitem", name="Rename")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(menu.get_by_role("menuitem", name="Pin")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_have_count(0)
    expect(button).to_be_focused()

    # Rename in place.
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    title = item(middle).get_by_role("textbox", name="Title")
    expect(title).to_be_focused()
    page.keyboard.type("改过的名字")
    page.keyboard.press("Enter")
    expect(item(middle).locator(".conversation-title")).to_have_text("改过的名字")
    expect(item(middle).get_by_role("button", name="Actions for “改过的名字”")).to_be_focused()

    # Pin: it heads the list in its own group, and focus stays on its menu button.
    page.keyboard.press("Space")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    pinned = page.locator("#conversation-group-pinned")
    expect(pinned.locator("li.conversation-item")).to_have_count(1)
    expect(page.locator("li.conversation-item").first).to_have_attribute("data-conversation", middle)
    expect(page.get_by_role("heading", name="Pinned")).to_be_visible()
    expect(item(middle).locator(".item-menu-button")).to_be_focused()
    page.reload()
    expect(page.locator("li.conversation-item").first).to_have_attribute("data-conversation", middle)

    # Delete, once confirmed.
    page.once("dialog", lambda dialog: dialog.accept())
    item(oldest).locator(".item-menu-button").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("End")
    expect(item(oldest).get_by_role("menuitem", name="Delete")).to_be_focused()
    page.keyboard.press("Enter")
    expect(item(oldest)).to_have_count(0)
    expect(page.locator("#conversation-search")).to_be_focused()
    page.reload()
    expect(item(oldest)).to_have_count(0)
    expect(item(newest)).to_have_count(1)

    # How the marks and the menu look: a pinned conversation, one waiting, its menu open.
    page.goto(f"{portal.base_url}/")
    _looks(page, screenshot, name="marks")
    button = item(newest).locator(".item-menu-button")
    button.click()
    expect(item(newest).get_by_role("menu")).to_be_visible()
    _looks(page, screenshot, name="menu", then=button.click)


# The browser's notifications, stood in for: the page's permission is kept in
# localStorage, each notification shown is recorded, and the tab is hidden on demand.
NOTIFICATIONS_JS = """
window.notified = [];
window.asked = 0;
class FakeNotification {
  static get permission() { return localStorage.getItem("test.permission") || "default"; }
  static requestPermission() {
    window.asked += 1;
    localStorage.setItem("test.permission", "granted");
    return Promise.resolve("granted");
  }
  constructor(title) { window.notified.push(title); }
}
window.Notification = FakeNotification;
Object.defineProperty(document, "hidden", { get: () => Boolean(window.tabHidden) });
"""


def test_a_hidden_tab_notifies_once_the_user_asked_for_it_when_a_turn_waits(portal, model_server, new_page):
    model_server.add(
        Text("第一次回答。"),
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999")),
        Text(call("web_fetch", url="library://999")),
        Text("读不到。"),
        Text("完成了。"),
    )
    user = portal.user_create(prefix="e2e-marks")
    asking = new_page()
    sign_in(asking, portal=portal, user=user)
    ask(asking, question="先问一个简单的问题")
    expect(asking.locator("article.turn").first).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    other = new_page()
    other.add_init_script(NOTIFICATIONS_JS)
    sign_in(other, portal=portal, user=user)
    toggle = other.get_by_role("button", name="Notify me")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert other.evaluate("window.asked") == 0
    toggle.click()
    expect(other.get_by_role("button", name="Notifications on")).to_have_attribute("aria-pressed", "true")
    other.reload()
    # Remembered, and never asked again on its own.
    expect(other.get_by_role("button", name="Notifications on")).to_be_visible()
    assert other.evaluate("window.asked") == 0
    other.evaluate("window.tabHidden = true")

    asking.locator("#composer-input").fill("再读一下那份文件")
    asking.get_by_role("button", name="Send").click()

    other.wait_for_function("() => window.notified.length > 0", timeout=TURN_TIMEOUT)
    assert other.evaluate("window.notified") == ["“先问一个简单的问题” is waiting for your approval"]
