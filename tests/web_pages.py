"""Web pages for the crawl agent to read: a real HTTP server on 127.0.0.1
serving the pages a test gives it by path, and what web_fetch must be set to
read it (ARTIFACTFLOW_FETCH_ALLOWED_HOSTS: it refuses loopback otherwise)."""

from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.local_server import LocalServer

ALLOWED_HOST = "127.0.0.1"


@dataclass
class PageSite(LocalServer):
    # Path to (content type, body); a test may change a page between reads.
    pages: dict[str, tuple[str, bytes]] = field(default_factory=dict)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    def url(self, path: str) -> str:
        return f"{self.origin}{path}"


def html_page(*, title: str, paragraphs: list[str]) -> tuple[str, bytes]:
    """An article page as a site serves one, with navigation and a footer around it."""
    body = "".join(f"<p>{paragraph}</p>" for paragraph in paragraphs)
    page = (
        f"<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>"
        f'<nav><a href="/">Home</a></nav><article><h1>{title}</h1>{body}</article>'
        "<footer>All rights reserved</footer></body></html>"
    )
    return "text/html; charset=utf-8", page.encode()


def _handler_for(site: PageSite):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            content_type, body = site.pages.get(self.path, ("text/html", b"<h1>Not here</h1>"))
            self.send_response(200 if self.path in site.pages else 404)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
