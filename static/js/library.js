// The Library page's form: a file over the upload limit is refused before it
// is sent (the server refuses it too, and a body over its cap with a 413).
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.matches || !form.matches("form.library-add-form")) return;
  const input = form.querySelector("input[type=file]");
  const error = document.getElementById("library-file-error");
  const file = input && input.files[0];
  if (file && file.size > Number(input.dataset.maxBytes)) {
    event.preventDefault();
    error.textContent = input.dataset.tooLarge;
    error.hidden = false;
    input.setAttribute("aria-invalid", "true");
  }
});
