// What waits for the user, across all their conversations, and each
// conversation's menu in the list (live/run_state.html, conversations/chat.html).

// The tab's title counts what waits for the user: "(2) ArtifactFlow". The count
// is an element the list renders and the page's one websocket pushes again.
const COUNTED = /^\(\d+\) /;
function titleCount() {
  const count = Number(document.getElementById("attention-count")?.dataset.count || 0);
  const title = document.title.replace(COUNTED, "");
  document.title = count > 0 ? `(${count}) ${title}` : title;
}

// A browser notification when a turn waits for approval or ends while the tab
// is hidden: only if the user turned them on with the list's button, which is
// the one place the browser's permission is asked (never on its own).
const NOTIFY_KEY = "artifactflow.notify";
const notifying = () => localStorage.getItem(NOTIFY_KEY) === "on" && "Notification" in window && Notification.permission === "granted";
const marksSeen = new Map();
function marksCheck({ notify }) {
  for (const mark of document.querySelectorAll(".run-mark[id]")) {
    const now = mark.dataset.mark || "";
    const before = marksSeen.get(mark.id);
    marksSeen.set(mark.id, now);
    if (notify && before !== undefined && before !== now && mark.dataset.notice && document.hidden && notifying()) {
      // One notification a conversation: a newer one replaces it.
      new Notification(mark.dataset.notice, { tag: mark.id, lang: document.documentElement.lang });
    }
  }
}
let checkQueued = false;
function swapped() {
  if (checkQueued) return;
  checkQueued = true;
  queueMicrotask(() => {
    checkQueued = false;
    titleCount();
    marksCheck({ notify: true });
  });
}
document.addEventListener("htmx:oobAfterSwap", swapped);
document.addEventListener("htmx:afterSwap", swapped);

function notificationsSetting() {
  for (const setting of document.querySelectorAll(".notifications-setting")) {
    if (!("Notification" in window)) continue;
    setting.hidden = false;
    const button = setting.querySelector(".notifications-toggle");
    const on = notifying();
    button.setAttribute("aria-pressed", String(on));
    button.textContent = on ? setting.dataset.on : setting.dataset.off;
    button.title = Notification.permission === "denied" ? setting.dataset.denied : "";
  }
}
document.addEventListener("click", async (event) => {
  const button = event.target.closest(".notifications-toggle");
  if (!button) return;
  if (notifying()) {
    localStorage.setItem(NOTIFY_KEY, "off");
  } else {
    // Asked here, on the user's press, and only while the browser has not been told.
    const permission = Notification.permission === "default" ? await Notification.requestPermission() : Notification.permission;
    localStorage.setItem(NOTIFY_KEY, permission === "granted" ? "on" : "off");
  }
  notificationsSetting();
});

// The menu of a conversation in the list, copied into its item from the
// list's one template as it opens: Enter or Space (or a click) opens it on its
// first item; arrows, Home, End and Tab move; Escape closes it and focus goes
// back to its button.
const PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000";
function fromTemplate(id, item) {
  const copy = document.getElementById(id).content.firstElementChild.cloneNode(true);
  const title = item.querySelector(".conversation-title").textContent;
  for (const element of [copy, ...copy.querySelectorAll("[action], [hx-post], [hx-confirm]")]) {
    for (const name of ["action", "hx-post"]) {
      if (element.hasAttribute(name)) element.setAttribute(name, element.getAttribute(name).replace(PLACEHOLDER_ID, item.dataset.conversation));
    }
    if (element.hasAttribute("hx-confirm")) element.setAttribute("hx-confirm", element.getAttribute("hx-confirm").replace("⁂", title));
  }
  return copy;
}
function menuClose(item, { focus = false } = {}) {
  item.querySelector(".item-menu-list")?.remove();
  const button = item.querySelector(".item-menu-button");
  button.setAttribute("aria-expanded", "false");
  button.removeAttribute("aria-controls");
  if (focus) button.focus();
}
function menusClose(except) {
  for (const menu of document.querySelectorAll("li.conversation-item .item-menu-list")) {
    const item = menu.closest("li.conversation-item");
    if (item !== except) menuClose(item);
  }
}
function menuOpen(item) {
  menusClose(item);
  if (!item.querySelector(".item-menu-list")) {
    const menu = fromTemplate("conversation-menu-template", item);
    menu.id = `item-menu-${item.dataset.conversation}`;
    menu.setAttribute("aria-label", item.querySelector(".item-menu-button").getAttribute("aria-label"));
    menu.querySelector(item.hasAttribute("data-pinned") ? "[data-pin]" : "[data-unpin]").remove();
    item.append(menu);
    htmx.process(menu);
  }
  const button = item.querySelector(".item-menu-button");
  button.setAttribute("aria-expanded", "true");
  button.setAttribute("aria-controls", `item-menu-${item.dataset.conversation}`);
  item.querySelector(".item-menu-list [role=menuitem]").focus();
}
document.addEventListener("click", (event) => {
  const button = event.target.closest(".item-menu-button");
  const item = event.target.closest("li.conversation-item");
  if (button) {
    if (button.getAttribute("aria-expanded") === "true") menuClose(item, { focus: true });
    else menuOpen(item);
    return;
  }
  if (event.target.closest("[data-action=rename]")) {
    renameOpen(item);
    return;
  }
  if (!event.target.closest(".item-menu-list")) menusClose();
});
document.addEventListener("keydown", (event) => {
  const item = event.target.closest?.("li.conversation-item");
  if (!item) return;
  if (event.target.matches(".item-menu-button") && event.key === "ArrowDown") {
    event.preventDefault();
    menuOpen(item);
    return;
  }
  const menu = event.target.closest(".item-menu-list");
  if (menu) {
    const items = [...menu.querySelectorAll("[role=menuitem]")];
    const at = items.indexOf(event.target);
    let next = null;
    if (event.key === "Escape") {
      event.preventDefault();
      menuClose(item, { focus: true });
      return;
    }
    if (event.key === "ArrowDown") next = (at + 1) % items.length;
    else if (event.key === "ArrowUp") next = (at - 1 + items.length) % items.length;
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = items.length - 1;
    else if (event.key === "Tab") {
      next = at + (event.shiftKey ? -1 : 1);
      // Past either end Tab leaves the menu, which closes.
      if (next < 0 || next >= items.length) {
        menuClose(item);
        return;
      }
    }
    if (next !== null) {
      event.preventDefault();
      items[next].focus();
    }
    return;
  }
  if (event.target.closest(".item-rename") && event.key === "Escape") {
    event.preventDefault();
    renameClose(item);
  }
});
// A conversation renamed in place: its title gives way to a field until saved or Escape.
function renameOpen(item) {
  menuClose(item);
  const form = fromTemplate("conversation-rename-template", item);
  const input = form.querySelector("input[name=title]");
  input.value = item.querySelector(".conversation-title").textContent;
  item.classList.add("renaming");
  item.append(form);
  htmx.process(form);
  input.focus();
  input.select();
}
function renameClose(item) {
  item.classList.remove("renaming");
  item.querySelector(".item-rename")?.remove();
  item.querySelector(".item-menu-button").focus();
}

// After the menu renamed, pinned or deleted a conversation its item is drawn
// again (or gone): focus goes back to its menu button, or to the search box.
let focusAfter = null;
document.addEventListener("htmx:beforeRequest", (event) => {
  const elt = event.detail.elt;
  const item = elt.closest?.("li.conversation-item");
  focusAfter = item && elt.closest(".item-menu-list, .item-rename") ? item.dataset.conversation : null;
});
document.addEventListener("htmx:beforeSwap", (event) => {
  // A deleted item leaves nothing to settle, and the event of the item gone would reach no one.
  if (focusAfter && event.detail.serverResponse === "") {
    focusAfter = null;
    setTimeout(() => document.getElementById("conversation-search")?.focus());
  }
});
document.addEventListener("htmx:afterSettle", () => {
  if (!focusAfter) return;
  const id = focusAfter;
  focusAfter = null;
  const item = document.querySelector(`li.conversation-item[data-conversation="${id}"]`);
  (item?.querySelector(".item-menu-button") || document.getElementById("conversation-search"))?.focus();
});

titleCount();
marksCheck({ notify: false });
notificationsSetting();
