// Enter sends the message; Shift+Enter starts a new line.
document.addEventListener("keydown", (event) => {
  const box = event.target;
  if (box.id !== "composer-input" || event.key !== "Enter" || event.shiftKey || event.isComposing) return;
  event.preventDefault();
  box.form.requestSubmit();
});

// Keep the newest text in view while it streams, unless the reader scrolled up.
let followThread = true;
const threadNearBottom = (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 80;
document.addEventListener("scroll", (event) => {
  if (event.target.id === "thread") followThread = threadNearBottom(event.target);
}, true);
const followNewest = () => {
  const thread = document.getElementById("thread");
  if (thread && followThread) thread.scrollTop = thread.scrollHeight;
};
document.addEventListener("htmx:afterSwap", followNewest);
document.addEventListener("htmx:oobAfterSwap", followNewest);
document.addEventListener("DOMContentLoaded", followNewest);

// A websocket signal says the conversation's artifacts changed: re-fetch the
// pane as it is shown, unless the user is in the middle of editing it.
document.addEventListener("htmx:oobAfterSwap", (event) => {
  if (event.detail.target.id !== "artifacts-changed") return;
  const pane = document.getElementById("artifact-pane");
  if (!pane || pane.querySelector("form.artifact-edit")) return;
  htmx.ajax("GET", pane.dataset.refreshUrl, {
    target: "#artifact-pane", swap: "outerHTML", headers: { "X-Pane-Refresh": "1" },
  });
});

// A refresh that arrives after the user opened the editor must not replace it.
document.addEventListener("htmx:beforeSwap", (event) => {
  const headers = (event.detail.requestConfig || {}).headers || {};
  if (headers["X-Pane-Refresh"] && document.querySelector("#artifact-pane form.artifact-edit")) {
    event.detail.shouldSwap = false;
  }
});
