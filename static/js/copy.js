// Copy buttons: an answer's markdown and an artifact's text (their buttons are
// rendered with the page, data-copy naming the hidden element holding the text),
// and every code block in answers and artifacts (buttons added here, so blocks
// that a push or a morph brings get one too). One listener on the document
// serves them all, whatever was swapped in after the page loaded.
(() => {
  const script = document.currentScript;
  const text = {
    copyCode: script.dataset.copyCode,
    copied: script.dataset.copied,
    failed: script.dataset.failed,
  };
  const RESET_MS = 2000;
  const CODE_BLOCKS = ".answer pre, .artifact-content pre, .edit-preview pre";

  let announcer;
  const announce = (message) => {
    if (!announcer) {
      announcer = document.createElement("div");
      announcer.className = "visually-hidden";
      announcer.setAttribute("aria-live", "polite");
      document.body.append(announcer);
    }
    // Cleared first, so a second copy of the same thing is said again.
    announcer.textContent = "";
    requestAnimationFrame(() => { announcer.textContent = message; });
  };

  // The page may be served over plain http inside a team's network, where the
  // Clipboard API does not exist: a selected textarea and execCommand still copy.
  const clipboardWrite = async (value) => {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(value);
    const area = document.createElement("textarea");
    area.value = value;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    if (!done) throw new Error("copy refused");
  };

  const sourceOf = (button) => {
    if (button.dataset.copy === "code") {
      const block = button.nextElementSibling;
      return block && block.tagName === "PRE" ? block.textContent : null;
    }
    const source = document.getElementById(button.dataset.copy);
    return source ? source.textContent : null;
  };

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button.copy-button");
    if (!button) return;
    const value = sourceOf(button);
    if (value === null) return;
    if (!button.dataset.label) button.dataset.label = button.textContent;
    let message = text.copied;
    try {
      await clipboardWrite(value);
      button.dataset.copied = "";
    } catch {
      message = text.failed;
    }
    button.textContent = message;
    announce(message);
    clearTimeout(button.copyReset);
    button.copyReset = setTimeout(() => {
      button.textContent = button.dataset.label;
      delete button.dataset.copied;
    }, RESET_MS);
  });

  const codeButtonsAdd = (root) => {
    for (const block of root.querySelectorAll(CODE_BLOCKS)) {
      const before = block.previousElementSibling;
      if (before && before.matches("button.copy-button[data-copy=code]")) continue;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "secondary copy-button copy-code";
      button.dataset.copy = "code";
      button.textContent = text.copyCode;
      block.before(button);
    }
  };
  // A morph removes the buttons the server's HTML does not have; they come back at once.
  let queued = false;
  new MutationObserver(() => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      codeButtonsAdd(document);
    });
  }).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("DOMContentLoaded", () => codeButtonsAdd(document));
})();
