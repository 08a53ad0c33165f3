// The page's socket comes back after any close but a refusal. The htmx
// websocket extension reconnects by itself only after an abnormal close or
// "try again later" (1006, 1011, 1012, 1013); a clean close (1000, 1001: a
// server restarting behind some proxies) would leave the page frozen. The
// server refuses for good with its own codes (live.consumers): the session
// signed out (4401), the conversation no longer shared (4403, app.js says so).
// Whatever ran meanwhile is caught up on reconnecting (app.js: htmx:wsOpen).
const SOCKET_ENDED = [4401, 4403];
const SOCKET_RETRIED = [1006, 1011, 1012, 1013];
// Up to 30 s between attempts, with jitter, so a restarted server is not met by every page at once.
const socketDelay = (retry) => Math.min(30000, 500 * 2 ** Math.min(retry, 6)) * (0.5 + Math.random() / 2);
htmx.config.wsReconnectDelay = socketDelay;
let socketRetries = 0;
let socketRetry = null;
let socketNotice = null;
const reconnectingShow = (shown) => {
  // A live region present from the start, its words put in and taken out, is read out as they come.
  const notice = document.getElementById("reconnecting");
  if (notice) notice.textContent = shown ? notice.dataset.text : "";
};
document.addEventListener("htmx:wsClose", (event) => {
  const { code } = event.detail.event;
  if (SOCKET_ENDED.includes(code)) return;
  // A blip is not announced: "Reconnecting…" shows after a second without a socket.
  if (socketNotice === null) socketNotice = setTimeout(() => reconnectingShow(true), 1000);
  if (SOCKET_RETRIED.includes(code)) return;
  clearTimeout(socketRetry);
  const { socketWrapper } = event.detail;
  const page = event.target;
  socketRetry = setTimeout(() => {
    if (page.isConnected) socketWrapper.reconnect();
  }, socketDelay(socketRetries));
  socketRetries += 1;
});
document.addEventListener("htmx:wsOpen", () => {
  socketRetries = 0;
  clearTimeout(socketNotice);
  socketNotice = null;
  reconnectingShow(false);
});

// What a push carries for an element the page does not have, placed before
// htmx swaps it (htmx would report an out-of-band swap without a target):
// - a run mark of a conversation the list does not show (it shows the newest;
//   one just started from the home page is not in it until the page moves on)
//   is left out;
// - a reader a conversation is shared with has no composer, so the owner's new
//   turn first reaches their page by the socket: it goes at the end of the
//   thread when it answers the turn the page ends with (the branch shown); a
//   turn of another branch waits for a reload;
// - a part of a turn's stream (its steps, status line, answer, thinking) for a
//   turn the page does not show, as another branch's after a switch while it
//   streamed, is left out: its branch, once shown, renders the turn whole.
const PUSHED_IDS = /id="((?:run-mark|message|steps|activity|answer|blocks|tail|thinking|thinking-text)-[^"]+)"/g;
const TURN_PART = /^(?:steps|activity|answer|blocks|tail|thinking|thinking-text)-(\d+)$/;
htmx.defineExtension("placed", {
  transformResponse: (text) => {
    const missing = [...text.matchAll(PUSHED_IDS)].some(([, id]) => !document.getElementById(id));
    if (!missing) return text;
    const pushed = document.createElement("template");
    pushed.innerHTML = text;
    // The fragment's own children: a selector's :scope matches no fragment.
    const pushedOob = (selector) => [...pushed.content.children].filter((e) => e.matches(`${selector}[hx-swap-oob]`));
    for (const mark of pushedOob(".run-mark")) {
      if (!document.getElementById(mark.id)) mark.remove();
    }
    const last = document.querySelector("#thread-turns > article.turn:last-of-type");
    for (const turn of pushedOob("article.turn")) {
      if (document.getElementById(turn.id)) continue;
      if (!document.getElementById("shared-banner") || !last || last.id !== `message-${turn.dataset.parent}`) {
        turn.remove();
        continue;
      }
      const append = document.createElement("div");
      append.setAttribute("hx-swap-oob", "beforeend:#thread-turns");
      turn.removeAttribute("hx-swap-oob");
      turn.replaceWith(append);
      append.append(turn);
    }
    for (const part of pushedOob("*")) {
      const turn = TURN_PART.exec(part.id);
      if (turn && !document.getElementById(`message-${turn[1]}`) && !pushed.content.querySelector(`#message-${turn[1]}`)) {
        part.remove();
      }
    }
    return pushed.innerHTML;
  },
});
