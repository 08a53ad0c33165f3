"""The artifact pane in the browser: it follows a running turn, and a user
uploads, edits, compares, restores and exports, with what the pane shows
kept in the page's URL."""

import re

import pytest
from docx import Document
from playwright.sync_api import expect

from tests import waits
from tests.agents.test_engine import call
from tests.e2e.test_first_turn import TURN_TIMEOUT, ask, sign_in
from tests.e2e.test_layout import sizes_schemes_languages
from tests.factories import docx_of_xml, pdf_sharing_one_stream
from tests.model_server import Text

pytestmark = pytest.mark.e2e

PLAN = "# Plan\n\n- [ ] search\n- [ ] write"
NOTES = b"# Field notes\n\n## Findings\n\n- first\n  - nested\n- second\n\n| site | count |\n|---|---|\n| north | 3 |\n"


def test_the_pane_follows_a_running_turn(portal, model_server, page, screenshot):
    model_server.add(
        Text(call("create_artifact", id="task_plan", content=PLAN, title="Plan")),
        # Slow, so the page is seen while the turn still holds the plan unsaved.
        Text(
            "Searching now.\n"
            + call("update_artifact", id="task_plan", old_str="- [ ] search", new_str="- [x] search"),
            chunk_size=3,
            delay=0.06,
        ),
        Text("The plan is done.", chunk_size=3, delay=0.05),
    )
    sign_in(page, portal=portal, user=portal.users[0])

    ask(page, question="Plan a small study")

    pane = page.locator("#artifact-pane")
    expect(pane.locator(".artifact-head")).to_contain_text("unsaved work of the running turn", timeout=TURN_TIMEOUT)
    expect(pane.locator(".artifact-content")).to_contain_text("search")
    expect(pane.locator("li.pinned .progress")).to_contain_text("0 of 2 done")
    expect(pane.locator("li.pinned .meta")).to_contain_text("version 1 on this branch (unsaved)")
    screenshot(page, name="live-plan")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(pane.locator(".artifact-head")).not_to_contain_text("unsaved work", timeout=TURN_TIMEOUT)
    # Created and edited in one turn, the plan has one version, which its two changes numbered 2.
    expect(pane.locator(".artifact-head")).to_contain_text("version 1 on this branch (v2)")
    expect(pane.locator(".artifact-content li", has_text="search").get_by_role("checkbox")).to_be_checked()
    expect(pane.locator(".artifact-content li", has_text="write").get_by_role("checkbox")).not_to_be_checked()
    expect(pane.locator("li.pinned progress")).to_have_attribute("value", "1")
    expect(pane.locator("li.pinned .progress")).to_contain_text("1 of 2 done")
    expect(page.locator("article.turn .answer")).to_have_text("The plan is done.")


def test_upload_edit_compare_and_export(portal, model_server, page, screenshot, tmp_path):
    model_server.add(Text("Ready for your notes."))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Keep my notes")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    pane = page.locator("#artifact-pane")

    page.set_input_files(
        "#artifact-file", files=[{"name": "../../field notes.md", "mimeType": "text/markdown", "buffer": NOTES}]
    )
    page.get_by_role("button", name="Upload", exact=True).click()

    expect(pane.locator(".artifact-list")).to_contain_text("uploaded")
    expect(pane.locator(".artifact-content h1")).to_have_text("Field notes")
    expect(pane.locator(".artifact-content table")).to_contain_text("north")

    pane.get_by_role("link", name="Edit").click()
    pane.get_by_label("Content of").fill(NOTES.decode().replace("- second", "- second\n- third"))
    # The preview is rendered as the pane will show the text, before it is saved.
    pane.get_by_role("button", name="Preview").click()
    expect(pane.locator("#edit-preview li", has_text="third")).to_be_visible()
    expect(pane.locator(".artifact-head")).to_contain_text("version 1")
    pane.get_by_role("button", name="Save as a new version").click()
    expect(pane.locator(".artifact-head")).to_contain_text("version 2")

    pane.locator(".pane-menu summary").click()
    pane.get_by_label("Compare").select_option("1")
    pane.get_by_label("with").select_option("2")
    pane.get_by_role("button", name="Compare", exact=True).click()
    expect(pane.locator(".diff .diff-add")).to_have_text("+- third")
    screenshot(page, name="compare")

    pane.get_by_label("Version", exact=True).select_option("1")
    expect(pane.locator(".artifact-head")).to_contain_text("version 1 of 2")
    pane.locator(".pane-menu summary").click()
    with page.expect_download() as download:
        pane.get_by_role("link", name="Export .docx").click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)

    document = Document(path)
    texts = [paragraph.text for paragraph in document.paragraphs]
    assert path.suffix == ".docx"
    assert "Field notes" in texts and "Findings" in texts and "nested" in texts
    assert "third" not in texts  # version 1 was exported
    assert document.tables[0].cell(1, 0).text == "north"

    dropped = page.evaluate_handle(
        """() => {
          const transfer = new DataTransfer();
          transfer.items.add(new File(["# Dropped notes\\n\\nFrom the desktop."], "dropped.md", { type: "text/markdown" }));
          return transfer;
        }"""
    )
    pane.dispatch_event("drop", {"dataTransfer": dropped})
    expect(pane.locator(".artifact-list")).to_contain_text("dropped.md")
    expect(pane.locator(".artifact-content h1")).to_have_text("Dropped notes")


# Counts the artifact pane elements put into the page from now on.
# Elements added to or taken from the pane from now on: a swap of any part of it.
COUNT_PANE_CHANGES_JS = """() => {
  window.paneChanges = 0;
  new MutationObserver((records) => {
    for (const record of records) window.paneChanges += [...record.addedNodes, ...record.removedNodes].length;
  }).observe(document.getElementById("artifact-pane"), { childList: true, subtree: true });
}"""


# A promise kept once htmx has next swapped the pane.
PANE_SWAPPED_JS = """() => {
  window.paneSwapped = new Promise((resolve) => {
    const swapped = (event) => {
      if (event.detail.target.id !== "artifact-pane") return;
      document.body.removeEventListener("htmx:afterSwap", swapped);
      resolve();
    };
    document.body.addEventListener("htmx:afterSwap", swapped);
  });
}"""


# Whether the pane was swapped (PANE_SWAPPED_JS) within the given milliseconds:
# a pane that never is fails the test rather than holding it.
SWAPPED_WITHIN_JS = """(ms) => Promise.race([
  window.paneSwapped.then(() => true),
  new Promise((resolve) => setTimeout(() => resolve(false), ms)),
])"""


# What htmx reports when the websocket swaps in the artifacts-changed signal.
SIGNAL_ARTIFACTS_CHANGED_JS = """() => {
  document.getElementById("artifacts-changed").dispatchEvent(new CustomEvent("htmx:oobAfterSwap", { bubbles: true }));
}"""


def test_a_refresh_that_brings_nothing_new_leaves_the_pane_alone(portal, model_server, page):
    model_server.add(Text("Ready for your notes."))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Keep these notes too")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    # The upload's answer shows the new artifact. Its change signal may reach
    # the page before or after that answer; either way it brings nothing new.
    page.set_input_files("#artifact-file", files=[{"name": "notes.md", "mimeType": "text/markdown", "buffer": NOTES}])
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.locator("#artifact-pane .artifact-content h1")).to_have_text("Field notes")
    page.evaluate(COUNT_PANE_CHANGES_JS)
    # A signal that surely comes after the upload's answer: the refresh it
    # causes shows the same pane, so nothing in the pane changes.
    page.evaluate(PANE_SWAPPED_JS)
    with page.expect_response(lambda r: r.request.method == "GET" and r.url.endswith("/artifacts/notes.md/")):
        page.evaluate(SIGNAL_ARTIFACTS_CHANGED_JS)
    assert page.evaluate(SWAPPED_WITHIN_JS, waits.ms(10))

    assert page.evaluate("window.paneChanges") == 0
    expect(page.locator("#artifact-pane .artifact-content h1")).to_have_text("Field notes")


LONG_LINE = "Heat pumps keep working in cold climates, " * 12


def _shots(page, screenshot, *, name):
    """The page in light and in dark, for a person to look at."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        screenshot(page, name=f"{name}-{scheme}")
    page.emulate_media(color_scheme="light")


RESTORED = "The text of version 1 on this branch (v1) is current again, as version 4 on this branch (v4)."


def _save_edit(pane, *, text, version):
    pane.get_by_role("link", name="Edit").click()
    pane.get_by_label("Content of").fill(text)
    pane.get_by_role("button", name="Save as a new version").click()
    expect(pane.locator(".artifact-head")).to_contain_text(f"version {version}")


def test_an_old_version_is_compared_word_by_word_and_restored(portal, model_server, new_page, screenshot):
    page = new_page(viewport={"width": 1366, "height": 900})
    model_server.add(Text("Ready for your notes."))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Keep my heat pump notes")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    pane = page.locator("#artifact-pane")
    first = NOTES.decode() + "\n" + LONG_LINE + "\n"
    page.set_input_files(
        "#artifact-file", files=[{"name": "pumps.md", "mimeType": "text/markdown", "buffer": first.encode()}]
    )
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(pane.locator(".artifact-content h1")).to_have_text("Field notes")
    second = first.replace("- first", "- first, checked twice").replace(
        "cold climates, H", "cold and damp climates, H", 1
    )
    _save_edit(pane, text=second, version=2)
    _save_edit(pane, text=second.replace("| north | 3 |", "| north | 4 |"), version=3)

    pane.locator(".pane-menu summary").click()
    pane.get_by_label("Compare").select_option("1")
    pane.get_by_label("with").select_option("3")
    # A refresh while the reader chooses (another save's change signal) keeps their choice.
    page.evaluate(PANE_SWAPPED_JS)
    page.evaluate(SIGNAL_ARTIFACTS_CHANGED_JS)
    assert page.evaluate(SWAPPED_WITHIN_JS, waits.ms(10))
    expect(pane.get_by_label("Compare")).to_have_value("1")
    pane.get_by_role("button", name="Compare", exact=True).click()

    expect(page).to_have_url(re.compile(r"\?artifact=pumps\.md&from=1&to=3$"))
    expect(pane.get_by_label("Compare")).to_have_value("1")
    expect(pane.get_by_label("with")).to_have_value("3")
    added = pane.locator(".diff-line.diff-add")
    expect(added.filter(has_text="checked twice").locator("ins")).to_have_text(", checked twice")
    expect(added.filter(has_text="north").locator("ins")).to_have_text("4")
    expect(added.filter(has_text="damp").locator("ins")).to_have_text("and damp")
    # Long lines wrap inside the pane, and short ones sit one line apart.
    lines = pane.locator(".diff-lines")
    assert lines.evaluate("el => el.scrollWidth <= el.clientWidth")
    short = pane.locator(".diff-line.diff-same", has_text="## Findings").bounding_box()
    line_height = float(lines.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)"))
    assert short["height"] < 1.5 * line_height
    _shots(page, screenshot, name="diff")

    pane.get_by_label("Version", exact=True).select_option("1")
    expect(pane.locator(".old-version")).to_contain_text(
        "You are viewing version 1 of 3 on this branch (v1) — not the current text."
    )
    expect(page).to_have_url(re.compile(r"\?artifact=pumps\.md&version=1$"))
    _shots(page, screenshot, name="old-version")
    pane.get_by_role("button", name="Restore this version").click()

    expect(pane.locator(".artifact-head")).to_contain_text("version 4 on this branch (v4)")
    expect(pane).to_contain_text(RESTORED)
    # The restore's own change signal brings nothing new: the message stays.
    page.evaluate(PANE_SWAPPED_JS)
    with page.expect_response(lambda r: r.url.endswith("/artifacts/pumps.md/")):
        page.evaluate(SIGNAL_ARTIFACTS_CHANGED_JS)
    assert page.evaluate(SWAPPED_WITHIN_JS, waits.ms(10))
    expect(pane).to_contain_text(RESTORED)
    expect(pane.locator(".old-version")).to_have_count(0)
    expect(pane.locator(".artifact-content")).not_to_contain_text("checked twice")
    expect(pane.locator(".artifact-content table")).to_contain_text("3")
    expect(page).to_have_url(re.compile(r"\?artifact=pumps\.md$"))


def test_a_link_opens_the_artifact_it_names_and_back_goes_back_to_it(portal, model_server, page):
    model_server.add(Text("Ready for your notes."))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Keep two notes")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    conversation_url = page.url
    for name, title in (("alpha.md", "Alpha"), ("beta.md", "Beta")):
        page.set_input_files(
            "#artifact-file", files=[{"name": name, "mimeType": "text/markdown", "buffer": f"# {title}\n".encode()}]
        )
        page.get_by_role("button", name="Upload", exact=True).click()
        expect(page.locator("#artifact-pane .artifact-content h1")).to_have_text(title)

    page.goto(conversation_url + "?artifact=alpha.md")
    pane = page.locator("#artifact-pane")
    expect(pane.locator(".artifact-content h1")).to_have_text("Alpha")
    expect(pane.locator(".artifact-list a[aria-current]")).to_contain_text("alpha.md")

    page.evaluate("window.samePage = true")
    pane.locator(".artifact-switcher summary").click()
    pane.locator(".artifact-list a", has_text="beta.md").click()
    expect(page).to_have_url(conversation_url + "?artifact=beta.md")
    expect(pane.locator(".artifact-content h1")).to_have_text("Beta")
    # The pane was swapped and the URL pushed, not a page loaded from the link's href.
    assert page.evaluate("window.samePage") is True

    page.go_back()
    expect(page).to_have_url(conversation_url + "?artifact=alpha.md")
    expect(pane.locator(".artifact-content h1")).to_have_text("Alpha")
    expect(pane.locator(".artifact-list a[aria-current]")).to_contain_text("alpha.md")
    # Back loads the page afresh from its URL rather than from a snapshot htmx
    # kept, which would show the thread and pane as they were back then.
    page.wait_for_load_state()
    assert page.evaluate("window.samePage") is None
    page.go_forward()
    expect(pane.locator(".artifact-content h1")).to_have_text("Beta")

    # A link naming an artifact that is not there still opens the conversation,
    # and says so until something changes (the page's connect-time refresh,
    # or this one, changes nothing).
    page.goto(conversation_url + "?artifact=gone.md")
    expect(pane.locator(".artifact-content h1")).to_have_text("Beta")
    page.evaluate(PANE_SWAPPED_JS)
    with page.expect_response(lambda r: r.url.endswith("/artifacts/")):
        page.evaluate(SIGNAL_ARTIFACTS_CHANGED_JS)
    assert page.evaluate(SWAPPED_WITHIN_JS, waits.ms(10))
    expect(pane.locator(".notice")).to_have_text(
        "The artifact this link names is not on this branch of the conversation; showing the newest."
    )


def test_each_branch_has_its_own_artifacts_and_a_diff_compares_across_them(portal, model_server, page, screenshot):
    model_server.add(
        Text(call("create_artifact", id="report", content="# Heat pumps\n\nHeat pumps win.", title="Heat pump report")),
        Text("Heat pumps, in the report."),
        Text(call("create_artifact", id="report", content="# Solar\n\nSolar wins.", title="Solar report")),
        Text("Solar, in the report."),
    )
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Heat pumps or gas?")
    turn = page.locator("article.turn")
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    pane = page.locator("#artifact-pane")
    expect(pane.locator(".artifact-content")).to_contain_text("Heat pumps win.")

    turn.locator("details.edit summary").click()
    turn.get_by_label("Edit your message").fill("Solar or gas?")
    turn.get_by_role("button", name="Send as a new branch").click()

    expect(turn.locator(".answer")).to_have_text("Solar, in the report.", timeout=TURN_TIMEOUT)
    # Switch only once the turn has ended, as after the first question: the
    # answer's text is whole before its artifacts are saved.
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    expect(pane.locator(".artifact-content")).to_contain_text("Solar wins.", timeout=TURN_TIMEOUT)
    expect(pane.locator(".artifact-list")).to_contain_text("Solar report")
    expect(pane.locator(".artifact-list")).not_to_contain_text("Heat pump report")

    page.get_by_role("button", name="Previous branch").click()
    expect(turn.locator(".answer")).to_have_text("Heat pumps, in the report.")
    expect(pane.locator(".artifact-content")).to_contain_text("Heat pumps win.")
    expect(pane.locator(".artifact-list")).to_contain_text("Heat pump report")
    expect(pane.get_by_label("Version", exact=True)).to_contain_text("v2 · other branch · “Solar or gas?”")

    # This branch's version 1 against the other branch's version 2.
    pane.locator(".pane-menu summary").click()
    pane.get_by_label("Compare").select_option("1")
    pane.get_by_label("with").select_option("2")
    pane.get_by_role("button", name="Compare", exact=True).click()
    expect(pane.locator(".diff .diff-del").last).to_have_text("-Heat pumps win.")
    expect(pane.locator(".diff .diff-add").last).to_have_text("+Solar wins.")
    screenshot(page, name="branch-diff")

    pane.locator(".pane-menu summary").click()
    pane.get_by_role("link", name="Delete…").click()
    expect(pane.get_by_role("alertdialog")).to_contain_text("Its 2 versions go too, 1 of them on other branches")
    screenshot(page, name="delete-confirm")
    pane.get_by_role("link", name="Keep it").click()
    expect(pane.get_by_role("alertdialog")).to_have_count(0)

    page.get_by_role("button", name="Next branch").click()
    expect(pane.locator(".artifact-content")).to_contain_text("Solar wins.")
    page.reload()
    expect(page.locator("#artifact-pane .artifact-content")).to_contain_text("Solar wins.")


WORD = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
# A document is read for at most the portal's EXTRACT_TIMEOUT (60 s, a bound of the
# product's own, not scaled) before it is refused: an upload's outcome is waited
# for that long, and a turn's time for the pane to show it. A busier machine than
# the one the suite measured as it started reads a slow document for longer.
READ_TIMEOUT = 60_000 + TURN_TIMEOUT


def test_a_document_shows_as_converting_and_a_refusal_keeps_the_draft(portal, model_server, page, screenshot):
    model_server.add(Text("Ready for your documents."))
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Read my documents")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    pane = page.locator("#artifact-pane")
    progress = pane.locator(".upload-progress")
    expect(progress).to_be_hidden()

    # Two pages drawing one 1.4 MB stream: a few seconds of reading, in the server's child process.
    slow = pdf_sharing_one_stream(pages=2, content=b"0 0 m 1 1 l S\n" * 100_000)
    page.set_input_files("#artifact-file", files=[{"name": "slow.pdf", "mimeType": "application/pdf", "buffer": slow}])
    pane.get_by_role("button", name="Upload", exact=True).click()

    expect(progress).to_have_text("Converting slow.pdf…")
    expect(pane.get_by_role("button", name="Upload", exact=True)).to_be_disabled()
    screenshot(page, name="converting")
    expect(pane.locator(".switcher-title")).to_have_text("slow.pdf", timeout=READ_TIMEOUT)
    expect(progress).to_be_hidden()

    page.set_input_files("#artifact-file", files=[{"name": "notes.md", "mimeType": "text/markdown", "buffer": NOTES}])
    pane.get_by_role("button", name="Upload", exact=True).click()
    expect(pane.locator(".artifact-content h1")).to_have_text("Field notes")
    pane.get_by_role("link", name="Edit").click()
    draft = NOTES.decode() + "- a line not saved yet\n"
    pane.get_by_label("Content of").fill(draft)
    # 10 MB of XML in a 60 KB Word document.
    bomb = docx_of_xml(b"<w:p><w:r><w:t>x</w:t></w:r></w:p>", repeat=300_000)
    page.set_input_files("#artifact-file", files=[{"name": "bomb.docx", "mimeType": WORD, "buffer": bomb}])
    pane.get_by_role("button", name="Upload", exact=True).click()

    expect(pane.locator("#upload-error")).to_have_text(
        "This Word document unpacks to too much data to read. "
        "Split it into smaller documents and upload them one at a time."
    )
    expect(pane.get_by_label("Content of")).to_have_value(draft)
    expect(pane.locator(".artifact-list")).not_to_contain_text("bomb.docx")
    screenshot(page, name="refused")


def test_an_upload_the_pane_took_is_no_longer_chosen_and_a_refused_one_stays(
    portal, model_server, new_page, screenshot
):
    model_server.add(Text("Ready for your notes."))
    page = new_page()
    sign_in(page, portal=portal, user=portal.user_create(prefix="e2e-upload"))
    ask(page, question="Keep my notes")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    pane = page.locator("#artifact-pane")
    chosen = pane.locator("#artifact-file")
    upload = pane.locator("form.artifact-upload button[type=submit]")

    for size, scheme, language in sizes_schemes_languages(page):
        where = f"{size}-{scheme}-{language}"
        if size == "phone" and not pane.is_visible():
            page.locator(".pane-toggle").click()
        name = f"notes-{where}.md"
        chosen.set_input_files(files=[{"name": name, "mimeType": "text/markdown", "buffer": NOTES}])
        upload.click()
        expect(pane.locator(".switcher-title")).to_have_text(name)
        # Taken: nothing left to send twice.
        expect(chosen).to_have_value("")
        screenshot(page, name=f"{where}-taken")

        # A NUL byte: not text. The refusal keeps the file chosen.
        chosen.set_input_files(files=[{"name": "broken.md", "mimeType": "text/markdown", "buffer": b"# Notes\x00"}])
        upload.click()
        expect(pane.locator("#upload-error")).to_contain_text("broken.md")
        expect(chosen).to_have_value(re.compile(r"broken\.md$"))
        expect(pane.locator(".switcher-title")).to_have_text(name)
        screenshot(page, name=f"{where}-refused")


def _next_turn(page, *, question, number):
    page.locator("#composer-input").fill(question)
    page.get_by_role("button", name="Send", exact=True).click()
    turn = page.locator("article.turn").nth(number - 1)
    expect(turn).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    return turn


@pytest.mark.parametrize("width", [1366, 390])
def test_an_activity_link_opens_the_version_its_turn_saved(portal, model_server, new_page, screenshot, width):
    """Turn 2 edits the report twice, saved as one version: v3, the second on
    the branch. Turns 3 and 4 write newer ones; turn 2's Activity still opens v3."""
    report = "# Research report\n\nHeat pumps work at -10 °C."
    model_server.add(
        Text(call("create_artifact", id="research_report", title="Research report", content=report)),
        Text("First draft."),
        Text(call("update_artifact", id="research_report", old_str="work", new_str="still work")),
        Text(call("update_artifact", id="research_report", old_str="-10 °C", new_str="-15 °C")),
        Text("Second draft."),
        *(
            reply
            for n in (3, 4)
            for reply in (
                Text(call("rewrite_artifact", id="research_report", content=f"# Research report\n\nDraft {n}.")),
                Text(f"Draft {n}."),
            )
        ),
    )
    page = new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Heat pumps or gas?")
    expect(page.locator("article.turn")).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    turn_2 = _next_turn(page, question="Make it colder", number=2)
    for n in (3, 4):
        _next_turn(page, question=f"Draft {n}, please", number=n)
    pane = page.locator("#artifact-pane")

    turn_2.locator(".activity-log summary").click()
    links = turn_2.locator(".step-artifact")
    expect(links).to_have_count(2)
    expect(links.first).to_have_text("Research report version 2 on this branch (v3)")
    _shots(page, screenshot, name=f"{width}-activity")
    links.first.get_by_role("link", name="Research report").click()

    expect(page).to_have_url(re.compile(r"\?artifact=research_report&version=3$"))
    expect(pane).to_be_visible()
    expect(pane.locator(".artifact-content")).to_have_text("Research report\nHeat pumps still work at -15 °C.")
    expect(pane.locator(".artifact-head")).to_contain_text("version 2 of 4 on this branch (v3)")
    expect(pane.locator(".old-version")).to_contain_text(
        "You are viewing version 2 of 4 on this branch (v3) — not the current text."
    )
    expect(pane.locator(".artifact-list")).to_contain_text("version 4 on this branch (v5)")
    expect(pane.get_by_label("Version", exact=True)).to_have_value("3")
    _shots(page, screenshot, name=f"{width}-activity-version")

    pane.locator(".pane-menu summary").click()
    pane.get_by_label("Compare").select_option("3")
    pane.get_by_label("with").select_option("5")
    pane.get_by_role("button", name="Compare", exact=True).click()
    expect(pane.locator(".diff > .meta")).to_have_text(
        "Changes from version 2 on this branch (v3) to version 4 on this branch (v5)"
    )
    _shots(page, screenshot, name=f"{width}-compare")


def _seeded_report(portal, *, then: str = "pass") -> str:
    """A one-turn conversation with a two-version report; its page, on the report."""
    user = portal.users[0].username
    code = f"from tests.e2e import seed; cid = seed.long_conversation(username={user!r}, turns=1); {then}; print(cid)"
    return f"{portal.base_url}/c/{portal.shell(code).strip()}/?artifact=research_report"


def _goto_pane(page, url):
    """The conversation page at `url`, its pane open: a phone shows it as a sheet, on a tap."""
    page.goto(url)
    if page.viewport_size["width"] < 600:
        page.locator(".pane-toggle").click()
    return page.locator("#artifact-pane")


def _open_editor(page, url):
    pane = _goto_pane(page, url)
    pane.get_by_role("link", name="Edit").click()
    expect(pane.get_by_label("Content of")).to_be_visible()
    return pane


def _race(tab_a, tab_b, url, *, mine, theirs):
    """Both tabs open the editor on the same version; B saves first, then A saves."""
    pane_a, pane_b = _open_editor(tab_a, url), _open_editor(tab_b, url)
    pane_b.get_by_label("Content of").fill(theirs)
    pane_b.get_by_role("button", name="Save as a new version").click()
    expect(pane_b.locator(".artifact-content")).to_contain_text(theirs.splitlines()[-1])
    pane_a.get_by_label("Content of").fill(mine)
    pane_a.get_by_role("button", name="Save as a new version").click()
    expect(pane_a.locator("#edit-conflict")).to_contain_text("This artifact changed since you started editing")
    return pane_a


@pytest.mark.parametrize("width", [1366, 390])
def test_two_tabs_editing_one_artifact_ask_the_second_what_to_keep(portal, model_server, new_page, screenshot, width):
    tab_a = new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
    tab_b = tab_a.context.new_page()
    sign_in(tab_a, portal=portal, user=portal.users[0])
    url = _seeded_report(portal)
    base = "# Report\n\nHeat pumps work in the cold."

    # Keep mine: my text goes on top of theirs.
    pane = _race(tab_a, tab_b, url, mine=base + "\n\nMine: the first.", theirs=base + "\n\nTheirs: the first.")
    expect(pane.locator("#edit-conflict .diff-add")).to_contain_text("Mine: the first.")
    expect(pane.locator("#edit-conflict .diff-del")).to_contain_text("Theirs: the first.")
    expect(pane.get_by_label("Content of")).to_have_value(base + "\n\nMine: the first.")
    # The question is in view, not below the fold of the pane.
    expect(pane.get_by_role("button", name="Keep mine")).to_be_in_viewport()
    _shots(tab_a, screenshot, name=f"{width}-choice")
    pane.get_by_role("button", name="Keep mine").click()
    expect(pane.locator(".artifact-content")).to_contain_text("Mine: the first.")
    expect(pane.locator(".artifact-head")).to_contain_text("version 4 on this branch (v4)")

    # Keep theirs, then take mine back.
    pane = _race(tab_a, tab_b, url, mine=base + "\n\nMine: the second.", theirs=base + "\n\nTheirs: the second.")
    pane.get_by_role("button", name="Keep theirs").click()
    expect(pane.locator(".artifact-content")).to_contain_text("Theirs: the second.")
    expect(pane.locator(".artifact-head")).to_contain_text("version 5 on this branch (v5)")
    _shots(tab_a, screenshot, name=f"{width}-discarded")
    pane.get_by_role("link", name="Recover the text you discarded").click()
    expect(pane.get_by_label("Content of")).to_have_value(base + "\n\nMine: the second.")
    pane.get_by_role("button", name="Save as a new version").click()
    expect(pane.locator(".artifact-content")).to_contain_text("Mine: the second.")
    expect(pane.get_by_role("link", name="Recover the text you discarded")).to_have_count(0)

    # Edit a merge: theirs beside, mine in the editor; saving makes the merge current.
    pane = _race(tab_a, tab_b, url, mine=base + "\n\nMine: the third.", theirs=base + "\n\nTheirs: the third.")
    pane.get_by_role("button", name="Edit a merge").click()
    # The conflict's own "Their text" is theirs too: wait for the merge editor that replaces it.
    expect(pane.get_by_label("Their text")).to_have_accessible_name(re.compile("read only"))
    expect(pane.get_by_label("Their text")).to_have_value(base + "\n\nTheirs: the third.")
    expect(pane.get_by_label("Content of")).to_have_value(base + "\n\nMine: the third.")
    _shots(tab_a, screenshot, name=f"{width}-merge")
    pane.get_by_label("Content of").fill(base + "\n\nTheirs: the third.\n\nMine: the third.")
    pane.get_by_role("button", name="Save as a new version").click()
    expect(pane.locator(".artifact-head")).to_contain_text("version 8 on this branch (v8)")
    expect(pane.locator(".artifact-content")).to_contain_text("Theirs: the third.")
    expect(pane.locator(".artifact-content")).to_contain_text("Mine: the third.")


@pytest.mark.parametrize("width", [1366, 390])
def test_an_agents_save_over_a_persons_edit_is_told_with_the_diff_and_restored(
    portal, model_server, new_page, screenshot, width
):
    page = new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
    sign_in(page, portal=portal, user=portal.users[0])
    url = _seeded_report(portal, then="seed.saved_over_a_persons_edit(conversation_id=cid, kind='overlap')")

    _goto_pane(page, url)
    notice = page.locator("#saved-over")
    expect(notice).to_contain_text(
        "The agents saved version 4 on this branch (v4) over your edit, version 3 on this branch (v3),"
        " made while the turn ran."
    )
    expect(notice.locator(".diff-del")).to_contain_text("My note: ground-source pumps cost more to install.")
    expect(notice.locator(".diff-add")).to_contain_text("The agents' summary.")
    _shots(page, screenshot, name=f"{width}-saved-over")
    notice.get_by_role("button", name="Restore my text").click()

    pane = page.locator("#artifact-pane")
    expect(pane.locator(".artifact-head")).to_contain_text("version 5 on this branch (v5)")
    expect(pane.locator(".artifact-content")).to_contain_text("My note: ground-source pumps cost more to install.")
    expect(page.locator("#saved-over")).to_have_count(0)


AGENTS_REPORT = "# Heat pumps\n\nThe agents' rewrite of the report."


@pytest.mark.parametrize("width", [1366, 390])
def test_an_agents_save_over_an_edit_made_during_the_turn_is_told_at_once_and_undone(
    portal, model_server, new_page, screenshot, width
):
    """A real turn: it rewrites the report, then waits for a permission while
    the person saves an edit of the same report; once approved, its save lands
    on top, and the pane says so without a reload."""
    model_server.add(
        Text(call("create_artifact", id="report", content="# Heat pumps\n\nA first draft.", title="Report")),
        Text("A first draft is in the report."),
        Text(call("rewrite_artifact", id="report", content=AGENTS_REPORT)),
        Text(call("call_subagent", agent="crawl_agent", instruction="Read library://999")),
        Text(call("web_fetch", url="library://999")),
        Text("I could not read it."),
        Text("The report is rewritten."),
    )
    page = new_page(viewport={"width": width, "height": 900 if width > 600 else 844})
    sign_in(page, portal=portal, user=portal.users[0])
    ask(page, question="Draft a heat pump report")
    turns = page.locator("article.turn")
    expect(turns.first).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)
    # The person starts editing the report; an open editor is never refreshed away.
    pane = _open_editor(page, page.url.split("?")[0] + "?artifact=report")
    pane.get_by_label("Content of").fill("# Heat pumps\n\nMy edit: 热泵 need a well-insulated house.")
    if width < 600:
        page.get_by_role("button", name="Back to the chat").click()
    page.locator("#composer-input").fill("Rewrite the report")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("form.permission")).to_be_visible(timeout=TURN_TIMEOUT)

    # Saved while the turn holds its own rewrite unsaved.
    if width < 600:
        page.locator(".pane-toggle").click()
    pane.get_by_role("button", name="Save as a new version").click()
    expect(pane.get_by_label("Content of")).to_have_count(0)
    if width < 600:
        page.get_by_role("button", name="Back to the chat").click()
    page.locator("form.permission").get_by_role("button", name="Approve").click()
    expect(turns.last).to_have_attribute("data-status", "completed", timeout=TURN_TIMEOUT)

    if width < 600:
        page.locator(".pane-toggle").click()
    notice = page.locator("#saved-over")
    expect(notice).to_contain_text("The agents saved version 3 on this branch (v3) over your edit")
    expect(notice.locator(".diff-del")).to_contain_text("My edit:")
    expect(notice.locator(".diff-add")).to_contain_text("The agents' rewrite")
    _shots(page, screenshot, name=f"{width}-agents-over-my-edit")
    notice.get_by_role("button", name="Restore my text").click()

    expect(pane.locator(".artifact-content")).to_contain_text("My edit:")
    expect(page.locator("#saved-over")).to_have_count(0)
