// "Repeat this research" (projects/schedule.html): the weekdays show for a
// weekly schedule and the day of the month for a monthly one, and a new
// schedule's time zone is the browser's, which the server cannot know.
(() => {
  const form = document.querySelector(".schedule-form");
  if (!form) return;
  const frequency = form.querySelector("[name=frequency]");
  const show = () => {
    for (const part of form.querySelectorAll("[data-for]")) part.hidden = part.dataset.for !== frequency.value;
  };
  frequency.addEventListener("change", show);
  show();
  const zone = form.querySelector("[data-browser-zone]");
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone && browserZone && !document.querySelector(".schedule-state")) zone.value = browserZone;
})();
