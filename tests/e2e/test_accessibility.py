"""Accessibility checked by a tool: axe-core (tests/e2e/vendor/axe-core, a
test asset the portal never serves) on every main state of the portal, at a
laptop's, a tablet's and a phone's size, light and dark: no serious or
critical violation."""

import re
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests import waits
from tests.agents.test_engine import call
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.model_server import Text

pytestmark = pytest.mark.e2e

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
SIZES = {"laptop": (1366, 900), "tablet": (1024, 768), "phone": (390, 844)}
BLOCKING = ("serious", "critical")

# The page's serious and critical violations, one entry a violation with the elements it was found on.
AXE_RUN_JS = """async (blocking) => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations
    .filter((v) => blocking.includes(v.impact))
    .map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.join(" "), summary: n.failureSummary })),
    }));
}"""


STREAMING_CODE = """
from django.contrib.auth import get_user_model
from django.utils import timezone
from agents.models import Run, RunEvent
from artifacts.models import ArtifactSession
from conversations.models import Conversation, Message
owner = get_user_model().objects.get(username={username!r})
conversation = Conversation.objects.create(owner=owner, title="A turn still streaming")
ArtifactSession.objects.create(conversation=conversation)
message = Message.objects.create(conversation=conversation, content="How do heat pumps work in the cold?")
conversation.active_branch = message
conversation.save(update_fields=["active_branch"])
now = timezone.now()
run = Run.objects.create(message=message, status=Run.Status.RUNNING, model="scripted", started_at=now, heartbeat_at=now)
RunEvent.objects.create(run=run, seq=1, type=RunEvent.Type.LLM_CHUNK, agent="lead_agent", data={{"content": "Heat pumps move heat"}})
print(conversation.pk, run.pk)
"""


@pytest.fixture(scope="module")
def states(portal, browser):
    """A user of the module's own with a conversation of answered turns and a
    two-version report, one whose turn waits for approval, one whose turn is
    streaming, and a library document."""
    user = portal.user_create(prefix="e2e-axe")
    seeded = portal.shell(
        "from django.contrib.auth import get_user_model; from library.services import library_document_create; "
        "from tests.e2e.seed import long_conversation; "
        f"user = get_user_model().objects.get(username={user.username!r}); "
        f"print(long_conversation(username={user.username!r}, turns=3)); "
        "print(library_document_create(user=user, title='Heat pump handbook', "
        "content='# Heat pumps\\n\\nAir-source heat pumps work below freezing.\\n\\n## Efficiency\\n\\nCOP falls in the cold.').pk)"
    )
    answered, document = seeded.split()
    portal.model_server.script.clear()
    portal.model_server.add(
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999")),
        Text(call("web_fetch", url="library://999")),
    )
    context = browser.new_context()
    context.set_default_timeout(waits.ms(10))
    page = context.new_page()
    sign_in(page, portal=portal, user=user)
    ask(page, question="Read the file for me")
    expect(page.locator("form.permission")).to_be_visible(timeout=TURN_TIMEOUT)
    waiting = page.url
    context.close()
    # A turn as a worker streaming it leaves it (no worker has it: it is ended below, long before
    # its heartbeat would be stale and the run recovered).
    streaming, run = portal.shell(STREAMING_CODE.format(username=user.username)).split()
    yield {
        "user": user,
        "answered": f"{portal.base_url}/c/{answered}/",
        "waiting": waiting,
        "streaming": f"{portal.base_url}/c/{streaming}/",
        "streaming_run": run,
        "document": f"{portal.base_url}/library/{document}/",
    }
    # Neither turn may go on to ask the model server another test has scripted.
    portal.shell(
        "from agents.models import Run; from agents.services.runs import runs_cancel_by_staff; "
        f"Run.objects.filter(pk={run}).update(status=Run.Status.CANCELLED); "
        f"runs_cancel_by_staff(run_ids=list(Run.objects.filter(message__conversation__owner__username={user.username!r}, "
        "status=Run.Status.WAITING_PERMISSION).values_list('pk', flat=True)))"
    )


def _violations(page, *, state: str) -> list[str]:
    """The serious and critical violations of the page as it is, one line an element."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=AXE)
    return [
        f"{state}: {v['impact']} {v['id']} ({v['help']}) at {node['target']}: {node['summary']}"
        for v in page.evaluate(AXE_RUN_JS, list(BLOCKING))
        for node in v["nodes"]
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_every_main_state_has_no_serious_or_critical_violation(portal, states, new_page, size, scheme):
    width, height = SIZES[size]
    # CSP bypassed for the tool's script alone: axe is injected inline, which the portal's policy refuses.
    page = new_page(
        viewport={"width": width, "height": height}, color_scheme=scheme, reduced_motion="reduce", bypass_csp=True
    )
    found = []

    page.goto(f"{portal.base_url}/accounts/login/")
    expect(page.get_by_label("Username")).to_be_visible()
    found += _violations(page, state="sign-in")

    sign_in(page, portal=portal, user=states["user"])
    page.goto(f"{portal.base_url}/")
    expect(page.locator("#composer-input")).to_be_focused()
    found += _violations(page, state="new conversation")

    if size != "laptop":
        # The conversation list is a drawer below a laptop's width.
        page.locator(".drawer-toggle").click()
        page.wait_for_function("() => document.getElementById('conversation-list').getBoundingClientRect().left === 0")
        found += _violations(page, state="drawer")
        page.keyboard.press("Escape")
        expect(page.locator("#conversation-list")).not_to_be_in_viewport()

    page.goto(states["answered"])
    expect(page.locator("article.turn")).to_have_count(3)
    expect(page.locator("article.turn").last.locator(".answer")).to_be_in_viewport()
    found += _violations(page, state="answered turns")

    page.locator("details.head-menu > summary").click()
    share = page.locator("#share-panel")
    share.locator("summary").click()
    expect(share.get_by_label("User")).to_be_visible()
    found += _violations(page, state="share panel")

    pane = page.locator("#artifact-pane")
    page.goto(f"{states['answered']}?artifact=research_report")
    if size == "phone":
        page.get_by_role("button", name="Artifacts").click()
    expect(pane.locator(".artifact-content")).to_contain_text("Air-source heat pumps")
    found += _violations(page, state="artifact open")

    page.goto(f"{states['answered']}?artifact=research_report&from=1&to=2")
    if size == "phone":
        page.get_by_role("button", name="Artifacts").click()
    expect(pane.locator(".diff-line.diff-add").first).to_be_visible()
    found += _violations(page, state="version compare")

    # Its heartbeat made fresh: the module outlasts the stale limit on a busy machine,
    # and the worker's sweep would take the seeded turn for dead and run it again.
    portal.shell(
        "from django.utils import timezone; from agents.models import Run; "
        f"Run.objects.filter(pk={states['streaming_run']}).update(heartbeat_at=timezone.now())"
    )
    page.goto(states["streaming"])
    expect(page.locator("article.turn")).to_have_attribute("data-status", "running")
    expect(page.locator("article.turn .answer")).to_contain_text("Heat pumps move heat")
    found += _violations(page, state="streaming turn")

    page.goto(states["waiting"])
    expect(page.locator("form.permission")).to_be_visible()
    found += _violations(page, state="waiting for approval")

    page.goto(f"{portal.base_url}/accounts/settings/")
    expect(page.locator("main h1")).to_be_visible()
    found += _violations(page, state="settings")

    page.goto(f"{portal.base_url}/library/")
    expect(page.locator("main h1")).to_have_text("Library")
    found += _violations(page, state="library")

    page.goto(states["document"])
    expect(page.locator("main h1").first).to_have_text("Heat pump handbook")
    found += _violations(page, state="library document")

    response = page.goto(f"{portal.base_url}/c/{uuid.uuid4()}/")
    assert response.status == 404
    expect(page.locator("main h1")).to_have_text(re.compile("Not found"))
    found += _violations(page, state="404")

    assert not found, f"{len(found)} serious or critical violation(s) at {size} {scheme}:\n" + "\n".join(found)
