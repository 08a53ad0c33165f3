// The keyboard: where focus starts, how the thread is crossed, the shortcuts
// (listed in base.html#shortcuts, opened with "?"), and focus kept inside the
// conversation list's drawer and the artifacts' sheet while they are open.

// Opening a conversation puts focus in its composer where a mouse or trackpad
// points (a fine pointer): there the next thing one does is type. On a touch
// screen focus would pop the on-screen keyboard over the thread one came to
// read, so it stays on the page. A page opened on one linked message keeps it in view.
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("composer-input");
  if (!box || !window.matchMedia("(pointer: fine)").matches) return;
  if (document.activeElement && document.activeElement !== document.body) return;
  box.focus({ preventScroll: true });
});

// The thread is one stop for Tab however long it is (a roving tabindex): one
// turn is the thread's stop, the newest unless the reader moved to another,
// and the arrow keys move between turns. A turn's own controls (Edit, Ask
// again, Copy, Activity, its links) are in the tab order only while focus is
// in that turn, so Tab goes from a turn through its controls to the composer.
// A turn's markup comes from the server, pushed and morphed at any time, with
// none of this: it is said again after every swap.
const TURN_CONTROLS = "a[href], button, input, select, textarea, summary, [tabindex]";
let turnChosen = null;
const turnsAll = () => [...document.querySelectorAll("#thread-turns > article.turn")];
const turnControlsSet = (turn, open) => {
  for (const control of turn.querySelectorAll(TURN_CONTROLS)) {
    if (open && control.hasAttribute("data-tabindex")) {
      const was = control.getAttribute("data-tabindex");
      if (was) control.setAttribute("tabindex", was);
      else control.removeAttribute("tabindex");
      control.removeAttribute("data-tabindex");
    } else if (!open && !control.hasAttribute("data-tabindex") && control.getAttribute("tabindex") !== "-1") {
      control.setAttribute("data-tabindex", control.getAttribute("tabindex") || "");
      control.setAttribute("tabindex", "-1");
    }
  }
};
const turnsRove = () => {
  const turns = turnsAll();
  if (!turns.length) return;
  const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest("#thread-turns > article.turn");
  if (focused) turnChosen = focused.id;
  const stop = focused || document.getElementById(turnChosen) || turns[turns.length - 1];
  for (const turn of turns) {
    turn.tabIndex = turn === stop ? 0 : -1;
    turnControlsSet(turn, turn === focused);
  }
};
let roveQueued = false;
const turnsRoveSoon = () => {
  if (roveQueued) return;
  roveQueued = true;
  requestAnimationFrame(() => {
    roveQueued = false;
    turnsRove();
  });
};
document.addEventListener("DOMContentLoaded", turnsRove);
["htmx:load", "htmx:afterSettle", "htmx:oobAfterSwap"].forEach((name) => document.addEventListener(name, turnsRoveSoon));
document.addEventListener("focusin", (event) => {
  if (event.target.closest && event.target.closest("#thread-turns")) turnsRove();
});
document.addEventListener("focusout", (event) => {
  // Focus left the thread (or the page): the turn's controls leave the tab order again, at once,
  // so a Shift+Tab pressed right after comes back to the turn, not through its controls.
  if (!event.relatedTarget || !event.relatedTarget.closest("#thread-turns")) turnsRove();
});
const TURN_KEYS = { ArrowUp: -1, ArrowDown: 1 };
document.addEventListener("keydown", (event) => {
  const turn = event.target;
  if (!turn.matches || !turn.matches("#thread-turns > article.turn") || event.altKey || event.ctrlKey || event.metaKey) return;
  const turns = turnsAll();
  const at = turns.indexOf(turn);
  let next = null;
  if (event.key in TURN_KEYS) next = turns[at + TURN_KEYS[event.key]];
  else if (event.key === "Home") next = turns[0];
  else if (event.key === "End") next = turns[turns.length - 1];
  else return;
  event.preventDefault();
  if (next) next.focus();
});

// Shortcuts, as in the chat apps people know. A key alone ("?", "/") never
// fires while one types in a field; one with Ctrl (⌘ on a Mac) or Shift+Esc does.
const mac = /Mac|iPhone|iPad/.test(navigator.platform);
const typing = (element) => element.closest && element.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])");
const overlaysOpen = () => [...document.querySelectorAll("[popover]")].filter((overlay) => overlay.matches(":popover-open"));
const searchFocus = () => {
  const search = document.getElementById("conversation-search");
  if (!search) return;
  // Below 1100 px the list is a drawer: it opens first.
  const list = document.getElementById("conversation-list");
  if (list && !search.checkVisibility()) {
    // Once open, the drawer would give focus to its first control (app.js): here it is the search's.
    list.addEventListener("toggle", () => search.focus(), { once: true });
    list.showPopover();
  }
  search.focus();
  search.select();
};
const composerFocus = () => {
  const box = document.getElementById("composer-input");
  if (!box) return;
  overlaysOpen().forEach((overlay) => overlay.hidePopover());
  box.focus();
};
const shortcutsShow = () => {
  const dialog = document.getElementById("shortcuts");
  if (dialog && !dialog.open) dialog.showModal();
};
document.addEventListener("keydown", (event) => {
  if (event.defaultPrevented || event.isComposing || document.querySelector("dialog[open]")) return;
  const command = mac ? event.metaKey : event.ctrlKey;
  const key = event.key.toLowerCase();
  let action = null;
  if (command && event.shiftKey && key === "o") {
    action = () => location.assign(document.querySelector(".brand").href);
  } else if (command && !event.shiftKey && !event.altKey && key === "k") {
    action = searchFocus;
  } else if (event.shiftKey && event.key === "Escape") {
    action = composerFocus;
  } else if (!event.ctrlKey && !event.metaKey && !event.altKey && !typing(event.target)) {
    if (event.key === "?") action = shortcutsShow;
    else if (event.key === "/") action = searchFocus;
  }
  if (!action) return;
  event.preventDefault();
  action();
});
// The overlay names the keys of this computer.
document.addEventListener("DOMContentLoaded", () => {
  if (mac) document.querySelectorAll("#shortcuts kbd[data-command]").forEach((kbd) => { kbd.textContent = "⌘"; });
});
// The skip link to the message box puts focus in it (a link to a field only scrolls to it).
document.addEventListener("click", (event) => {
  if (!event.target.closest("[data-skip-composer]")) return;
  event.preventDefault();
  composerFocus();
});
document.addEventListener("click", (event) => {
  if (!event.target.closest("[data-shortcuts-open]")) return;
  event.target.closest("details")?.removeAttribute("open");
  shortcutsShow();
});

// The drawer and the sheet (chat.html: popovers) keep Tab inside while open
// as an overlay, and on closing give focus back to what opened them: the
// browser does so for a button that names them (popovertarget), this does it
// for a shortcut too.
const TABBABLE = "a[href], button:not([disabled]), input:not([type=hidden]):not([disabled]), select:not([disabled]), textarea:not([disabled]), summary, [tabindex]";
const tabbables = (overlay) => [...overlay.querySelectorAll(TABBABLE)]
  .filter((element) => element.tabIndex >= 0 && element.checkVisibility());
document.addEventListener("keydown", (event) => {
  if (event.key !== "Tab" || event.altKey || event.ctrlKey || event.metaKey) return;
  const overlay = overlaysOpen().find((open) => open.contains(document.activeElement) || document.activeElement === document.body);
  if (!overlay) return;
  const stops = tabbables(overlay);
  if (!stops.length) return;
  const first = stops[0];
  const last = stops[stops.length - 1];
  const at = stops.indexOf(document.activeElement);
  if (event.shiftKey && at <= 0) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && (at === -1 || at === stops.length - 1)) {
    event.preventDefault();
    first.focus();
  }
});
const overlayOpeners = new WeakMap();
document.addEventListener("beforetoggle", (event) => {
  const overlay = event.target;
  if (!overlay.matches("[popover]")) return;
  if (event.newState === "open") overlayOpeners.set(overlay, document.activeElement);
}, true);
document.addEventListener("toggle", (event) => {
  const overlay = event.target;
  if (!overlay.matches("[popover]") || event.newState !== "closed") return;
  const opener = overlayOpeners.get(overlay);
  overlayOpeners.delete(overlay);
  const lost = document.activeElement === document.body || overlay.contains(document.activeElement);
  if (lost && opener && opener.isConnected && opener !== document.body) opener.focus();
}, true);
