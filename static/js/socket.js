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
