// htmx's "morph" swap (hx-swap="morph", hx-swap-oob="morph"): the element is
// brought to the server's markup by idiomorph (vendored), which keeps every
// element it can, with its focus, caret, scroll and open state. Idiomorph's
// own htmx extension is not used: it takes every other swap style (the
// stream's beforeend) for an inline one, nesting what is appended, and it
// evaluates code for a morph with options, which the CSP forbids.
htmx.defineExtension("morph", {
  isInlineSwap: (swapStyle) => swapStyle === "morph",
  handleSwap: (swapStyle, target, fragment) =>
    swapStyle === "morph" && Idiomorph.morph(target, fragment.children, { morphStyle: "outerHTML" }),
});
