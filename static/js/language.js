// The bar's language menu, on every page: choosing a language switches to it,
// back on the page as it is now (htmx may have moved its URL on, so the
// server's "next" may be out of date). Without script its button does it.
document.addEventListener("change", (event) => {
  if (event.target.id !== "language-select") return;
  const { form } = event.target;
  form.elements.next.value = location.pathname + location.search;
  form.requestSubmit();
});
