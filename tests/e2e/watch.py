"""What a person sees while a turn streams, recorded as it changes.

Every page the `new_page` fixture makes is watched: a script in the page
samples each turn (its question and status) every INTERVAL_MS and after every
htmx swap, and reports each change, each htmx error event and each console
error to the test process. When the test ends, every sample is checked:

- a question asked with `ask()` stays on the page from the moment its turn is
  seen not yet ended (queued, running, waiting) until it is seen ended (a turn that vanishes mid-stream, or whose
  question is replaced, is the defect a person sees first);
- no htmx error (a swap with no target, a failed request), no script error and
  no console error but a resource's failed load (tests ask for 404s).

`Watch.reload_matches()` adds the last invariant: the page's final state is
what a reload of it shows.
"""

import json
import weakref
from dataclasses import dataclass, field

from playwright.sync_api import expect

INTERVAL_MS = 100
ENDED = ("completed", "failed", "cancelled")
# htmx's error events (htmx 2): each is a swap or request a person does not see happen.
HTMX_ERRORS = (
    "htmx:oobErrorNoTarget",
    "htmx:targetError",
    "htmx:swapError",
    "htmx:responseError",
    "htmx:sendError",
    "htmx:onLoadError",
    "htmx:historyCacheError",
)

# Console errors that are no news: a page or file answering 404 or 403 (tests
# provoke those and assert on them), and htmx's own log of its events, whose
# errors the listeners above report by name (an aborted request, which htmx also
# logs, is a request the page cancelled on purpose).
CONSOLE_LEFT_OUT = ("Failed to load resource", "htmx:", "Response Status Error Code")

WATCH_JS = """
(() => {
  const report = (entry) => window.__watchReport({ ...entry, url: location.pathname });
  const describe = (element) =>
    element && element.nodeType === 1
      ? element.tagName.toLowerCase() + (element.id ? "#" + element.id : "")
      : String(element || "");
  for (const name of HTMX_ERRORS) {
    document.addEventListener(name, (event) => {
      const detail = event.detail || {};
      // A swap without a target names the element it carried; a request, the element that sent it.
      const where = detail.content && detail.content.id
        ? "#" + detail.content.id
        : describe(detail.target || detail.elt || event.target);
      report({ kind: "error", name, where });
    }, true);
  }
  // Sent to the test only when it differs from the last: a page streaming for
  // minutes costs the test a message per change of what it asserts on.
  let last = "";
  const sample = () => {
    if (document.readyState === "loading") return;
    const turns = [...document.querySelectorAll("article.turn")].map((turn) => {
      const question = turn.querySelector(".bubble.user");
      return { status: turn.dataset.status || "", question: question ? question.innerText.trim() : null };
    });
    const now = JSON.stringify(turns);
    if (now === last) return;
    last = now;
    report({ kind: "sample", turns });
  };
  setInterval(sample, INTERVAL_MS);
  document.addEventListener("htmx:afterSettle", sample);
  document.addEventListener("htmx:oobAfterSwap", sample);
  document.addEventListener("DOMContentLoaded", sample);
})();
""".replace("HTMX_ERRORS", json.dumps(HTMX_ERRORS)).replace("INTERVAL_MS", str(INTERVAL_MS))

_WATCHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@dataclass
class Watch:
    page: object
    samples: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    questions: list = field(default_factory=list)

    def asked(self, question: str) -> None:
        """`question` must stay on the page while its turn runs."""
        self.questions.append(question)

    def _reported(self, source, entry: dict) -> None:
        if entry["kind"] == "sample":
            self.samples.append(entry)
        else:
            self.errors.append(f"{entry['name']} at {entry['where']} on {entry['url']}")

    def _console(self, message) -> None:
        if message.type == "error" and not message.text.startswith(CONSOLE_LEFT_OUT):
            self.errors.append(f"console error on {self.page.url}: {message.text[:2000]}")

    def _page_error(self, error) -> None:
        self.errors.append(f"script error on {self.page.url}: {error}")

    def violations(self, *, allowed: tuple[str, ...] = ()) -> list[str]:
        """Every broken invariant, with the sample that broke it; htmx error events named in `allowed` pass."""
        found = [error for error in self.errors if not error.startswith(allowed)] if allowed else list(self.errors)
        for question in self.questions:
            running_on = None
            for number, sample in enumerate(self.samples):
                mine = [turn for turn in sample["turns"] if turn["question"] == question]
                if running_on is None:
                    # Queued, running or waiting for approval: not yet ended.
                    if any(turn["status"] not in ENDED for turn in mine):
                        running_on = sample["url"]
                    continue
                if sample["url"] != running_on:
                    # The person went elsewhere: what they see there is another page's.
                    running_on = None
                    continue
                if not mine:
                    shown = [turn["question"] for turn in sample["turns"]]
                    found.append(f"sample {number}: the running turn of {question!r} is gone; the page shows {shown}")
                    break
                if any(turn["status"] in ENDED for turn in mine):
                    running_on = None
        return found

    def check(self, *, allowed: tuple[str, ...] = ()) -> None:
        violations = self.violations(allowed=allowed)
        assert not violations, "what the person saw broke an invariant:\n" + "\n".join(violations)

    def reload_matches(self, *, status: str) -> None:
        """The turns as the page shows them now, once settled at `status`, are what a reload shows."""
        last = self.page.locator("article.turn").last
        expect(last).to_have_attribute("data-status", status)
        before = _turns(self.page)
        self.page.reload()
        expect(self.page.locator("article.turn").last).to_have_attribute("data-status", status)
        assert _turns(self.page) == before


def _turns(page) -> list[dict]:
    return page.eval_on_selector_all(
        "article.turn",
        """(turns) => turns.map((turn) => ({
          status: turn.dataset.status,
          question: turn.querySelector(".bubble.user")?.innerText.trim() ?? null,
          answer: turn.querySelector(".answer")?.innerText.trim() ?? "",
          errors: [...turn.querySelectorAll("p.error")].map((error) => error.innerText.trim()),
        }))""",
    )


def watch_start(page) -> Watch:
    """Watches `page` from its next navigation on."""
    watch = Watch(page=page)
    page.expose_binding("__watchReport", watch._reported)
    page.add_init_script(WATCH_JS)
    page.on("console", watch._console)
    page.on("pageerror", watch._page_error)
    _WATCHES[page] = watch
    return watch


def watch_of(page) -> Watch | None:
    return _WATCHES.get(page)
