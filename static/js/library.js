// The Library page's form: files over the upload limit (together: they go in
// one request) are refused before they are sent (the server refuses them too,
// and a body over its cap with a 413).
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.matches || !form.matches("form.library-add-form")) return;
  const input = form.querySelector("input[type=file]");
  const error = document.getElementById("library-file-error");
  const size = input ? [...input.files].reduce((total, file) => total + file.size, 0) : 0;
  if (size > Number(input.dataset.maxBytes)) {
    event.preventDefault();
    error.textContent = input.dataset.tooLarge;
    error.hidden = false;
    input.setAttribute("aria-invalid", "true");
  }
});
