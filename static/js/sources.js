// A link of an answer or a report that leads to another site opens that page
// as the conversation's agents read it (its snapshot), or a page saying none
// was kept, with the live page's link (library.views.source_open). The link
// itself keeps the page's address, so hovering, copying or a modified click
// (a new window, a download) still reach the live page. One listener on the
// document serves links that pushes and morphs bring later.
(() => {
  const LINKS = ".answer a[href], .artifact-content a[href]";
  document.addEventListener("click", (event) => {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    const link = event.target.closest(LINKS);
    const sources = document.querySelector("main[data-sources]");
    if (!link || !sources || !/^https?:\/\//i.test(link.getAttribute("href"))) return;
    event.preventDefault();
    const opened = new URL(sources.dataset.sources, location.href);
    opened.searchParams.set("url", link.href);
    // A citation's quotation (artifactflow.markdown), for the snapshot to mark.
    if (link.dataset.quote) opened.searchParams.set("q", link.dataset.quote);
    window.open(opened.toString(), "_blank", "noopener");
  });
})();
