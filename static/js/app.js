// Enter sends the message; Shift+Enter starts a new line. While a turn runs
// the composer offers Stop, and Enter sends nothing.
document.addEventListener("keydown", (event) => {
  const box = event.target;
  if (box.id !== "composer-input" || event.key !== "Enter" || event.shiftKey || event.isComposing) return;
  event.preventDefault();
  if (!document.querySelector("#composer-actions[data-busy]")) box.form.requestSubmit();
});

// Keep the newest text in view while it streams, unless the reader scrolled up.
let followThread = true;
const threadNearBottom = (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 80;
document.addEventListener("scroll", (event) => {
  if (event.target.id === "thread") followThread = threadNearBottom(event.target);
}, true);
// What is swapped beside the thread (the list's marks, the title, the composer's
// Send or Stop and the artifact pane's refresh when the socket connects) changes
// nothing in it: following then would undo a scroll up whose scroll event has
// not been handled yet.
const BESIDE_THREAD = ".run-mark, #attention-count, #conversation-title, #conversation-list, #composer-actions, #artifact-pane";
const followNewest = (event) => {
  if (event?.detail?.target?.closest?.(BESIDE_THREAD)) return;
  const thread = document.getElementById("thread");
  if (thread && followThread) thread.scrollTop = thread.scrollHeight;
};
document.addEventListener("htmx:afterSwap", followNewest);
document.addEventListener("htmx:oobAfterSwap", followNewest);
// A link to one message (…?message=N#message-N) opens on it, not on the newest.
// Such a link without ?message= (from before the thread came in pages) is sent
// on with it, so the server's page holds the message however old it is.
document.addEventListener("DOMContentLoaded", () => {
  const linked = /^#message-(\d+)$/.exec(location.hash);
  if (!linked || !document.getElementById("thread")) return followNewest();
  const turn = document.getElementById(linked[0].slice(1));
  if (turn) {
    followThread = false;
    turn.scrollIntoView({ block: "start" });
  } else if (!new URLSearchParams(location.search).has("message")) {
    location.replace(`${location.pathname}?message=${linked[1]}${linked[0]}`);
  } else {
    followNewest();
  }
});
// A question sent names the turn the page ends with: if another tab moved the
// conversation to another branch, the answer is that branch's thread, not one
// turn under this branch's (views.message_create).
document.addEventListener("htmx:configRequest", (event) => {
  if (event.detail.elt.id !== "composer") return;
  const last = document.querySelector("#thread-turns > article.turn:last-of-type");
  if (last) event.detail.parameters.after = last.id.replace("message-", "");
});
// A notice under the thread (a retry that started a branch) is about what came
// before: a question sent takes it away. Done here, as the page holds a notice
// or none, rather than by the answer deleting one the page may not have.
document.addEventListener("htmx:beforeRequest", (event) => {
  if (event.detail.elt.id === "composer") document.getElementById("thread-notice")?.remove();
});
// Older turns go in above what the reader is looking at (chat.html#turns): the
// thread keeps its distance from the bottom, so nothing on screen moves.
let olderFromBottom = null;
document.addEventListener("htmx:beforeSwap", (event) => {
  const thread = document.getElementById("thread");
  if (!thread || !event.detail.elt.matches || !event.detail.elt.matches("#thread .older-turns")) return;
  olderFromBottom = thread.scrollHeight - thread.scrollTop;
});
document.addEventListener("htmx:afterSwap", () => {
  const thread = document.getElementById("thread");
  if (olderFromBottom === null || !thread) return;
  thread.scrollTop = thread.scrollHeight - olderFromBottom;
  olderFromBottom = null;
});
// A notice about what the reader just did (a retry that started a branch) sits
// at the bottom of the thread it brought: shown, even if they had scrolled up to act.
document.addEventListener("htmx:afterSwap", () => {
  const notice = document.querySelector("#thread [data-follow]");
  if (!notice) return;
  notice.removeAttribute("data-follow");
  followThread = true;
  followNewest();
});

// On every (re)connect, whenever the thread is swapped (another branch
// shown) and when a question's turn is added below it, tell the server which
// turns this page shows as still running: any that ended meanwhile is sent in
// its final form. A branch rendered just before its turn ended shows it
// running, and the end, pushed while the page still showed the other branch,
// had no turn to land on (socket.js). A turn just added is followed from then
// on, read every few seconds even if every wake-up of the worker's is lost.
const RUNNING = ["waiting_slot", "queued", "running", "waiting_permission"];
let pageSocket = null;
const runningSend = () => {
  const running = [...document.querySelectorAll("article.turn[data-run]")]
    .filter((turn) => RUNNING.includes(turn.dataset.status))
    .map((turn) => Number(turn.dataset.run));
  pageSocket?.send(JSON.stringify({ running }));
};
document.addEventListener("htmx:wsOpen", (event) => {
  pageSocket = event.detail.socketWrapper;
  runningSend();
});
document.addEventListener("htmx:afterSettle", (event) => {
  if (["thread", "thread-turns"].includes(event.detail.target?.id)) runningSend();
});

// The artifact pane refreshes itself on the websocket's change signal, and the
// user's own requests in it cancel a refresh on its way (pane.html: hx-get,
// hx-trigger, hx-sync). Two things htmx cannot say are said here.
//
// A refresh yields to the user: it is not made while a request the user made
// for the pane (opened the editor, a diff, another artifact) is on its way.
// hx-sync gives one strategy to all of the pane's requests, and the one that
// lets the user cancel a refresh (replace) would let a refresh cancel the user.
const PANE_ASKED = "#artifact-pane .htmx-request, .htmx-request[hx-target='#artifact-pane']";
// A refresh that yielded is owed: it is made once the user's request is
// answered, so that a change signalled meanwhile (a turn saving a version
// while the next page of a long text comes in) still reaches the pane. An
// answer that is the whole pane (an upload, another artifact) was rendered
// after the change and shows it: then nothing is owed, and no refresh on its
// way could bring back what the user had just left.
let paneRefreshOwed = false;
document.addEventListener("htmx:confirm", (event) => {
  if (event.detail.elt.id !== "artifact-pane" || !document.querySelector(PANE_ASKED)) return;
  event.preventDefault();
  paneRefreshOwed = true;
});
document.addEventListener("htmx:afterRequest", (event) => {
  if (!paneRefreshOwed) return;
  if (event.detail.target?.id === "artifact-pane") {
    paneRefreshOwed = false;
    return;
  }
  if (document.querySelector(PANE_ASKED)) return;
  paneRefreshOwed = false;
  const pane = document.getElementById("artifact-pane");
  // Its own trigger (pane.html); a pane the user's answer left without one (an open editor) owes nothing.
  if (pane && pane.hasAttribute("hx-get")) htmx.trigger(pane, "pane:refresh");
});
// An answer about the thread that brings the pane with it (another branch's:
// the branch arrows, a retry that started a branch) shows the pane as it was
// when that answer was rendered. A change signalled while the answer was on its
// way may be newer, and the refresh it made was for the pane the answer
// replaces: overwritten by the answer, or landing on a pane no longer there.
// A pane such an answer put in place of the one before is fetched again, once
// htmx has set it up (settled) to hear its refresh. (The pane's own answers
// morph it, the same element: they keep their rule, above.)
let paneSignals = 0;
// The pane before an answer that came after a change signal was swapped in.
let paneBeforeStaleAnswer = null;
document.addEventListener("htmx:beforeRequest", (event) => {
  event.detail.xhr.paneSignals = paneSignals;
});
document.addEventListener("htmx:beforeSwap", (event) => {
  const stale = event.detail.xhr.paneSignals !== paneSignals;
  paneBeforeStaleAnswer = stale ? document.getElementById("artifact-pane") : null;
});
document.addEventListener("htmx:oobAfterSwap", (event) => {
  if (event.target.id === "artifacts-changed") paneSignals += 1;
});
document.addEventListener("htmx:afterSettle", () => {
  const before = paneBeforeStaleAnswer;
  paneBeforeStaleAnswer = null;
  const pane = document.getElementById("artifact-pane");
  if (before && pane !== before && pane?.hasAttribute("hx-get")) htmx.trigger(pane, "pane:refresh");
});
// Beside the chat the artifact pane folds away for room to read, and the
// choice is remembered. On a phone it is a sheet over the chat instead, as the
// conversation list is a drawer below 1100 px: both are popovers there
// (chat.html: popover, popovertarget), so the browser opens them on their
// button and closes them on Escape, a tap beside them or their close button,
// and gives focus back to the button. Only the fold and the focus on opening
// are said here.
const phone = window.matchMedia("(max-width: 899px)");
const drawerWide = window.matchMedia("(min-width: 1100px)");
const paneHidden = () => localStorage.getItem("artifactflow.paneHidden") === "1";
const paneShow = () => {
  const frame = document.querySelector(".layout.with-pane");
  if (!frame) return;
  frame.classList.toggle("pane-hidden", paneHidden());
  // On a phone the browser says whether the sheet is open, from its popover.
  document.querySelectorAll(".pane-toggle").forEach((button) => {
    if (phone.matches) button.removeAttribute("aria-expanded");
    else button.setAttribute("aria-expanded", String(!paneHidden()));
  });
};
const overlaysClose = () => document.querySelectorAll("[popover]").forEach((overlay) => overlay.hidePopover());
document.addEventListener("click", (event) => {
  if (phone.matches || !event.target.closest(".pane-toggle")) return;
  // Beside the chat the button folds the pane, and opens no sheet.
  event.preventDefault();
  localStorage.setItem("artifactflow.paneHidden", paneHidden() ? "0" : "1");
  paneShow();
});
document.addEventListener("toggle", (event) => {
  const overlay = event.target;
  if (!overlay.matches("[popover]") || event.newState !== "open") return;
  const first = overlay.querySelector("input, button, a[href], textarea, select");
  if (first) first.focus();
}, true);
phone.addEventListener("change", () => { overlaysClose(); paneShow(); });
drawerWide.addEventListener("change", overlaysClose);
document.addEventListener("DOMContentLoaded", paneShow);
document.addEventListener("htmx:afterSettle", paneShow);
// A link in the thread that opens a version in the pane (an Activity's
// artifact) shows the pane it filled: the sheet on a phone, the pane beside
// the chat if it was folded away.
document.addEventListener("htmx:afterSwap", (event) => {
  const link = event.detail.requestConfig && event.detail.requestConfig.elt;
  const sheet = document.getElementById("pane-frame");
  if (!link || link.getAttribute("hx-target") !== "#artifact-pane" || !link.closest("#thread") || !sheet) return;
  if (phone.matches) {
    if (!sheet.matches(":popover-open")) sheet.showPopover();
  } else if (paneHidden()) {
    localStorage.setItem("artifactflow.paneHidden", "0");
    paneShow();
  }
});

// The head's menu and what opens in it (Share, Export) fold on Escape, the
// innermost first, back to its summary (Rename folds by its own handler,
// below); the menu folds on a click anywhere outside it too.
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.shiftKey || !event.target.closest?.("details.head-menu[open]")) return;
  const fold = event.target.closest("details[open]");
  if (fold.matches("details.rename")) return;
  fold.open = false;
  fold.querySelector("summary").focus();
});
document.addEventListener("click", (event) => {
  document.querySelectorAll("details.head-menu[open]").forEach((menu) => {
    if (!menu.contains(event.target)) menu.open = false;
  });
});

// Rename and Edit open on their field, and Escape folds them again. Only an
// opening the user asked for moves focus: a turn re-rendered over the
// websocket reopens its folds without taking focus from where one types.
let foldOpened = null;
document.addEventListener("click", (event) => {
  const summary = event.target.closest("details.rename > summary, details.edit > summary");
  foldOpened = summary ? summary.parentElement : null;
});
document.addEventListener("toggle", (event) => {
  const fold = event.target;
  if (fold !== foldOpened || !fold.open) return;
  foldOpened = null;
  const field = fold.querySelector("input:not([type=hidden]), textarea");
  if (field) field.focus();
}, true);
document.addEventListener("keydown", (event) => {
  // Shift+Esc is the way to the composer (keys.js), from a fold too.
  const fold = event.key === "Escape" && !event.shiftKey && event.target.closest && event.target.closest("details.rename[open], details.edit[open]");
  if (!fold) return;
  fold.open = false;
  fold.querySelector("summary").focus();
});

// The pane's artifact switcher and its menu fold on Escape, back to their summary.
document.addEventListener("keydown", (event) => {
  const fold = event.key === "Escape" && event.target.closest && event.target.closest(".artifact-switcher[open], .pane-menu[open]");
  if (!fold) return;
  fold.open = false;
  fold.querySelector("summary").focus();
});

// A long text's pages the reader brought in with "Show more" stay through a
// refresh of the pane that shows the same text (its data-pages): the refresh
// brings only the first page.
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.requestConfig?.elt?.id !== "artifact-pane") return;
  const shown = document.querySelector("#artifact-pane .artifact-content[data-pages]");
  if (!shown || !shown.querySelector(".artifact-page:not([data-start='0'])")) return;
  const fresh = new DOMParser().parseFromString(event.detail.serverResponse, "text/html");
  const content = fresh.querySelector(".artifact-content[data-pages]");
  if (!content || content.dataset.pages !== shown.dataset.pages) return;
  content.innerHTML = shown.innerHTML;
  event.detail.serverResponse = fresh.body.innerHTML;
});

// The pages of a long text come in as the reader scrolls to the end of the
// last ("Show more" fires on sight: pane.html), and at most PAGES_KEPT stay:
// reading through a 20 MB text never puts it all in the page. A page far out
// of view is dropped for a loader that fetches it again when the reader comes
// back to where it was (the server keeps each page rendered). The top loader
// holds the starts of every page dropped above (data-starts), the last its own.
const PAGES_KEPT = 5;

function pageLoader(content, { start, earlier, starts = [] }) {
  const box = document.createElement("div");
  box.className = earlier ? "show-earlier" : "show-later";
  box.dataset.starts = starts.join(" ");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "secondary";
  button.textContent = earlier ? content.dataset.earlierLabel : content.dataset.laterLabel;
  button.setAttribute("hx-get", `${content.dataset.pageUrl}&start=${start}`);
  button.setAttribute("hx-target", `closest .${box.className}`);
  button.setAttribute("hx-swap", "outerHTML");
  button.setAttribute("hx-sync", "this:drop");
  button.setAttribute("hx-trigger", "click, intersect once");
  // A page fetched again above comes alone: the way on past it is below it already.
  if (earlier) button.setAttribute("hx-select", ".artifact-page");
  box.append(button);
  return box;
}

function pagesKept(content, { cameAbove, starts }) {
  const pages = () => content.querySelectorAll(":scope > .artifact-page");
  while (pages().length > PAGES_KEPT) {
    if (cameAbove) {
      const last = pages()[pages().length - 1];
      while (last.nextElementSibling) last.nextElementSibling.remove();
      last.replaceWith(pageLoader(content, { start: last.dataset.start, earlier: false }));
    } else {
      const first = pages()[0];
      starts.push(first.dataset.start);
      first.remove();
    }
  }
  content.querySelector(":scope > .show-earlier")?.remove();
  if (starts.length) {
    const loader = pageLoader(content, { start: starts.at(-1), earlier: true, starts });
    content.prepend(loader);
    htmx.process(loader);
  }
  const later = content.querySelector(":scope > .show-later");
  if (later) htmx.process(later);
}

// The page the reader is reading, and where it is in the window, as the
// pages around it change: it is put back there after, so that a page coming
// in or going above it moves nothing the reader sees. (The browser's own
// scroll anchoring may hold the pane's header instead, when it is in view.)
let pageRead = null;

function pageReadNow(content) {
  const page = [...content.querySelectorAll(":scope > .artifact-page")].find(
    (each) => each.getBoundingClientRect().bottom > 0,
  );
  return page ? { page, top: page.getBoundingClientRect().top } : null;
}

function scrollerOf(element) {
  for (let box = element.parentElement; box; box = box.parentElement) {
    const overflow = getComputedStyle(box).overflowY;
    if ((overflow === "auto" || overflow === "scroll") && box.scrollHeight > box.clientHeight) return box;
  }
  return document.scrollingElement;
}

function pagesLoader(event) {
  const loader = event.detail.requestConfig?.elt?.closest?.(".show-more, .show-later, .show-earlier");
  const content = document.querySelector("#artifact-pane .artifact-content[data-page-url]");
  return loader && content ? { loader, content } : {};
}

document.addEventListener("htmx:beforeSwap", (event) => {
  const { content } = pagesLoader(event);
  pageRead = content ? pageReadNow(content) : null;
});

document.addEventListener("htmx:afterSwap", (event) => {
  const { loader, content } = pagesLoader(event);
  if (!loader) return;
  const cameAbove = loader.classList.contains("show-earlier");
  const above = cameAbove ? loader : content.querySelector(":scope > .show-earlier");
  const starts = above?.dataset.starts ? above.dataset.starts.split(" ") : [];
  // The page a top loader fetched is in: its start leaves the list.
  if (cameAbove) starts.pop();
  pagesKept(content, { cameAbove, starts });
  if (pageRead?.page.isConnected) {
    scrollerOf(pageRead.page).scrollTop += pageRead.page.getBoundingClientRect().top - pageRead.top;
  }
  pageRead = null;
});

// A file dropped anywhere on the pane is uploaded through the pane's form.
document.addEventListener("dragover", (event) => {
  const pane = event.target.closest && event.target.closest("#artifact-pane");
  // A conversation shared with the reader has no upload form: nothing to drop on.
  if (!pane || !pane.querySelector("#artifact-file") || !event.dataTransfer.types.includes("Files")) return;
  event.preventDefault();
  pane.classList.add("dropping");
});
document.addEventListener("dragleave", (event) => {
  const pane = event.target.closest && event.target.closest("#artifact-pane");
  if (pane && !pane.contains(event.relatedTarget)) pane.classList.remove("dropping");
});
document.addEventListener("drop", (event) => {
  const pane = event.target.closest && event.target.closest("#artifact-pane");
  if (!pane || !pane.querySelector("#artifact-file") || !event.dataTransfer.files.length) return;
  event.preventDefault();
  pane.classList.remove("dropping");
  const input = pane.querySelector("#artifact-file");
  input.files = event.dataTransfer.files;
  input.form.requestSubmit();
});

// A turn, its thinking and the pane are morphed, not replaced (morph.js:
// hx-swap-oob="morph", hx-swap="morph"), so what the reader
// has in hand survives an update: focus and the caret, scroll positions, a
// refresh that brings nothing new changes nothing. What the server's markup
// cannot know is kept here: a fold the reader opened or closed, an edit being
// typed, a choice made in the pane, and the pane's message about what the
// reader just did, which a refresh never repeats. The thinking fold opens and closes by itself (open
// while the model thinks, closed once it answers) until the reader chooses.
let paneRefreshing = false;
// The pane's fold (switcher or menu) the answer being swapped in was chosen from, if any.
let paneChosenIn = null;
const PANE_FOLDS = [".artifact-switcher", ".pane-menu"];
document.addEventListener("htmx:beforeSwap", (event) => {
  const elt = event.detail.requestConfig?.elt;
  paneRefreshing = elt?.id === "artifact-pane";
  paneChosenIn = PANE_FOLDS.find((fold) => elt?.closest?.(fold)) || null;
});
Object.assign(Idiomorph.defaults.callbacks, {
  beforeAttributeUpdated: (name, element) => {
    if (name === "data-chosen") return false;
    // A refresh leaves the reader's choices in the pane's forms (the versions to compare) as they are;
    // the version list says which version is shown, so it follows what the refresh shows.
    if (paneRefreshing && (name === "selected" || name === "checked") && !element.closest("#version-select")) return false;
    if (name !== "open" || element.tagName !== "DETAILS") return true;
    // The switcher or menu the reader chose from folds once the choice is shown; a refresh, or an
    // answer to a choice made elsewhere (a menu opened while it was on its way), leaves them be.
    if (element.matches(PANE_FOLDS.join(", "))) return paneChosenIn !== null && element.matches(paneChosenIn);
    return element.matches(".thinking") && !element.dataset.chosen;
  },
  beforeNodeMorphed: (old) => !(old instanceof HTMLTextAreaElement && old.closest("details[open]")),
  beforeNodeRemoved: (old) => !(paneRefreshing && old.matches?.("[data-pane-message]")),
});
document.addEventListener("click", (event) => {
  const summary = event.target.closest && event.target.closest("details.thinking[id] > summary");
  // The click is about to toggle the fold: what it will be is the reader's choice.
  if (summary) summary.parentElement.dataset.chosen = summary.parentElement.open ? "closed" : "open";
});
// An open activity fold comes back as its loader: once htmx has set the loader
// up, it loads the newest steps at once.
document.addEventListener("htmx:load", (event) => {
  const turn = event.detail.elt;
  if (!turn.matches || !turn.matches("article.turn")) return;
  turn.querySelectorAll("details.activity-log[open] > [hx-get]").forEach((loader) => htmx.trigger(loader.parentElement, "toggle"));
});
// Streaming thinking stays scrolled to its newest line unless the reader scrolled up in it.
const thinkingFollow = new Set();
document.addEventListener("htmx:oobBeforeSwap", (event) => {
  const { target } = event.detail;
  const texts = target.matches && target.matches(".thinking-text") ? [target] : [...target.querySelectorAll(".thinking-text[id]")];
  for (const text of texts) {
    if (text.scrollHeight - text.scrollTop - text.clientHeight < 24) thinkingFollow.add(text.id);
  }
});
document.addEventListener("htmx:oobAfterSwap", () => {
  for (const id of thinkingFollow) {
    const text = document.getElementById(id);
    if (text) text.scrollTop = text.scrollHeight;
  }
  thinkingFollow.clear();
});

// The composer's draft is kept in the browser, per conversation, from the
// first key pressed until the server accepts the message: it survives a
// refusal, a reload, a visit to another conversation, a lost connection. A
// full or unavailable storage keeps nothing, and breaks nothing.
const DRAFT_PREFIX = "artifactflow.draft.";
// A message is at most 20,000 characters; a longer draft is still kept, to be cut down.
const DRAFT_MAX_CHARS = 100000;
const draftKey = (form) => DRAFT_PREFIX + form.dataset.draft;
const draftSave = (form, text) => {
  try {
    if (text.trim()) localStorage.setItem(draftKey(form), text.slice(0, DRAFT_MAX_CHARS));
    else localStorage.removeItem(draftKey(form));
  } catch (error) {
    // Storage full or refused: the text is still in the box.
  }
};
const draftRestore = () => {
  const form = document.getElementById("composer");
  const box = form && form.querySelector("#composer-input");
  if (!box) return;
  // Text already in the box was typed before this script ran (the page shows
  // before its deferred scripts run), or is a refused message the server sent
  // back: no input event kept it, so it is kept now.
  if (box.value) {
    draftSave(form, box.value);
    return;
  }
  try {
    const kept = localStorage.getItem(draftKey(form));
    if (kept) box.value = kept;
  } catch (error) {
    // Nothing kept that can be read.
  }
};
document.addEventListener("DOMContentLoaded", draftRestore);
// Signing out takes the drafts along: the next person at this browser sees none.
document.addEventListener("submit", (event) => {
  if (!event.target.matches("form.signout")) return;
  try {
    Object.keys(localStorage).filter((key) => key.startsWith(DRAFT_PREFIX)).forEach((key) => localStorage.removeItem(key));
  } catch (error) {
    // Nothing kept that can be reached.
  }
});
document.addEventListener("input", (event) => {
  if (event.target.id === "composer-input") draftSave(event.target.form, event.target.value);
});
const composerError = (text) => {
  const error = document.getElementById("composer-error");
  if (!error) return;
  error.textContent = text;
  error.hidden = !text;
};
// Only a message the server accepted (2xx) empties the composer and its draft;
// a refusal (422, 409) shows the server's words in its place, and a failure
// the server never answered, or answered with an error page, says so here.
// A session that ended sends the page to sign in again (HX-Redirect): that is no acceptance either.
// The words come translated from the form's data attributes (chat.html).
const signInAgain = (form, xhr) => (xhr.getResponseHeader("HX-Redirect") || "").startsWith(form.dataset.loginUrl);
document.addEventListener("htmx:afterRequest", (event) => {
  const form = event.detail.elt;
  if (form.id !== "composer") return;
  const xhr = event.detail.xhr;
  const status = xhr.status;
  if (status >= 200 && status < 300 && !signInAgain(form, xhr)) {
    draftSave(form, "");
    form.reset();
    composerError("");
    // The new question is at the bottom: follow it even if the reader had scrolled up.
    followThread = true;
    followNewest();
  } else if (status === 0) {
    composerError(form.dataset.unreachable);
  } else if (status === 403) {
    composerError(form.dataset.expired);
  } else if (status >= 500) {
    composerError(form.dataset.failed);
  }
});

// A save refused because the artifact changed meanwhile asks what to keep:
// the question is brought into view, not left below the fold of the pane.
// Only when the pane itself was swapped: a turn streaming beside it moves nothing.
document.addEventListener("htmx:afterSwap", (event) => {
  if (event.detail.target.id !== "artifact-pane") return;
  const question = document.querySelector("#artifact-pane #edit-conflict");
  if (question) question.scrollIntoView({ block: "start" });
});

// A file over the upload limit is refused before it is sent; one the server
// refuses anyway (413 from its request-body cap) shows the server's words.
// One on its way names itself in the form's "Converting …" line, and its
// bar fills as its bytes are sent. An earlier refusal goes as soon as
// another file is chosen or sent. A file the pane took is no longer chosen,
// so Upload cannot send it twice; a refused one stays chosen, to send again.
// (The pane's answer is morphed in: the input, kept by its id, keeps its file.)
const uploadError = (text) => {
  const error = document.getElementById("upload-error");
  if (!error) return;
  error.textContent = text;
  error.hidden = !text;
};
const isUpload = (element) => Boolean(element?.matches?.("form.artifact-upload"));
document.addEventListener("htmx:beforeRequest", (event) => {
  if (!isUpload(event.detail.elt)) return;
  const input = event.detail.elt.querySelector("#artifact-file");
  const file = input.files[0];
  if (file && file.size > Number(input.dataset.maxBytes)) {
    event.preventDefault();
    uploadError(input.dataset.tooLarge);
    return;
  }
  uploadError("");
  const name = event.detail.elt.querySelector("[data-upload-name]");
  if (file && name) name.textContent = file.name;
  const bar = event.detail.elt.querySelector("progress.upload-bytes");
  if (bar) {
    bar.removeAttribute("value");
    bar.hidden = false;
  }
});
document.addEventListener("htmx:xhr:progress", (event) => {
  const bar = isUpload(event.target) && event.target.querySelector("progress.upload-bytes");
  if (!bar || !event.detail.lengthComputable) return;
  // htmx reports the answer's download too: the bar only ever fills.
  if (bar.hasAttribute("value") && bar.value / bar.max > event.detail.loaded / event.detail.total) return;
  bar.max = event.detail.total;
  bar.value = event.detail.loaded;
});
document.addEventListener("htmx:afterRequest", (event) => {
  // The form that asked, which a taken upload's answer has replaced: htmx then names the pane as the asker.
  if (!isUpload(event.detail.requestConfig?.elt)) return;
  const bar = document.querySelector("form.artifact-upload progress.upload-bytes");
  if (bar) bar.hidden = true;
  const input = document.getElementById("artifact-file");
  const status = event.detail.xhr.status;
  if (input && status >= 200 && status < 300) input.value = "";
});
document.addEventListener("change", (event) => {
  if (event.target.id === "artifact-file") uploadError("");
});
document.addEventListener("htmx:responseError", (event) => {
  if (event.detail.xhr.status === 413 && isUpload(event.detail.elt)) uploadError(event.detail.xhr.responseText);
});

// A conversation no longer shared with the reader closes its socket with 4403
// (live.consumers.NO_LONGER_SHARED), which the websocket extension does not
// reconnect after: the page says so rather than looking live.
document.addEventListener("htmx:wsClose", (event) => {
  if (event.detail.event.code !== 4403) return;
  const notice = document.getElementById("share-ended");
  if (notice) notice.hidden = false;
});
