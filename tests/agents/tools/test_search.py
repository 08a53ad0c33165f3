import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from agents.tools.base import AUTO, ToolContext
from agents.tools.search import (
    NOTHING_IN_LIBRARY,
    WEB_SEARCH_TOOL,
    search_provider,
    web_search,
)
from tests.factories import LibraryDocumentFactory


class ProviderServer:
    """A real HTTP server on a free local port that answers every request with
    the scripted status and body, and keeps what it was sent."""

    def __init__(self):
        self.status = 200
        self.body = b'{"results": []}'
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                outer.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "body": self.rfile.read(length),
                        "headers": dict(self.headers),
                    }
                )
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reply(self, payload, *, status=200):
        self.body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.status = status


@pytest.fixture
def provider_server():
    server = ProviderServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def search_settings(settings):
    settings.SEARCH_PROVIDER = ""
    settings.SEARXNG_URL = ""
    settings.TAVILY_API_KEY = ""
    settings.SEARCH_MAX_RESULTS = 8
    settings.FETCH_TIMEOUT = 5.0
    return settings


@pytest.fixture
def context(user):
    return ToolContext(artifacts=None, user=user)


@pytest.fixture
def closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens there once the socket is closed.
    return f"http://127.0.0.1:{port}"


# --- Provider choice -------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "searxng_url", "tavily_key", "expected"),
    [
        ("", "", "", "local"),
        ("", "", "tvly-key", "tavily"),
        ("", "http://searx", "tvly-key", "searxng"),
        ("local", "http://searx", "tvly-key", "local"),
        ("tavily", "http://searx", "tvly-key", "tavily"),
    ],
)
def test_provider_choice(search_settings, configured, searxng_url, tavily_key, expected):
    search_settings.SEARCH_PROVIDER = configured
    search_settings.SEARXNG_URL = searxng_url
    search_settings.TAVILY_API_KEY = tavily_key

    assert search_provider() == expected


def test_the_tool_is_described_for_the_model():
    assert WEB_SEARCH_TOOL.name == "web_search"
    assert WEB_SEARCH_TOOL.handler is web_search
    assert WEB_SEARCH_TOOL.permission == AUTO
    assert WEB_SEARCH_TOOL.parameters["required"] == ["query"]


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        ("bing", "Unknown search provider 'bing'; set ARTIFACTFLOW_SEARCH_PROVIDER to one of searxng, tavily, local."),
        ("searxng", "SEARXNG_URL is not set"),
        ("tavily", "TAVILY_API_KEY is not set"),
    ],
)
def test_a_misconfigured_provider_is_a_clear_error(search_settings, context, provider, message):
    search_settings.SEARCH_PROVIDER = provider

    result = web_search(context, query="anything")

    assert not result.success
    assert result.content.startswith('<error tool="web_search">')
    assert message in result.content


# --- Local (the library) -----------------------------------------------------------


def test_local_search_end_to_end(search_settings, context):
    wal = LibraryDocumentFactory(
        title="SQLite WAL <mode>", content="Readers & a writer share the WAL; checkpoints copy pages back."
    )
    LibraryDocumentFactory(title="Heat pumps", content="A coefficient of performance above three.")

    result = web_search(context, query="WAL checkpoints")

    assert result.success
    assert result.metadata == {"provider": "local", "results": 1}
    assert result.content.startswith('<search_results provider="local" query="WAL checkpoints"><result>')
    assert f"<title>SQLite WAL &lt;mode&gt;</title><url>{wal.url}#1</url><snippet>" in result.content
    assert "Readers &amp; a writer" in result.content
    assert result.content.endswith("</snippet></result></search_results>")
    [source] = result.output["sources"]
    assert result.output["kind"] == "sources" and (source["title"], source["url"]) == (
        "SQLite WAL <mode>",
        f"{wal.url}#1",
    )
    assert "Readers & a writer" in source["excerpt"]


def test_a_chinese_query_searches_the_library_by_its_words(search_settings, context):
    heat_pumps = LibraryDocumentFactory(title="热泵", content="空气源热泵在寒冷气候中的性能。热泵的效率用COP衡量。")
    LibraryDocumentFactory(title="Heat pumps", content="A coefficient of performance above three.")

    result = web_search(context, query="热泵的效率")

    assert result.metadata == {"provider": "local", "results": 1}
    assert f"<title>热泵</title><url>{heat_pumps.url}#1</url>" in result.content
    assert "**热泵**的**效率**" in result.content


def test_no_results_says_so(search_settings, context, db):
    result = web_search(context, query='"NEAR( photosynthesis')

    assert result.success
    assert result.metadata == {"provider": "local", "results": 0}
    assert result.content == (
        f'<search_results provider="local" query=\'"NEAR( photosynthesis\'>{NOTHING_IN_LIBRARY}</search_results>'
    )
    assert "Nothing in the team library matches" in result.content
    assert result.output == {"kind": "sources", "sources": [], "message": NOTHING_IN_LIBRARY}


def test_weak_matches_in_the_library_are_no_results(search_settings, context):
    # The SQLite document has "write" and "application"; two words of five are not enough.
    LibraryDocumentFactory(title="SQLite WAL mode", content="Writes are fast, which suits web applications.")

    result = web_search(context, query="How do I write a cover letter for a job application?")

    assert result.metadata == {"provider": "local", "results": 0}
    assert NOTHING_IN_LIBRARY in result.content
    assert web_search(context, query="Why are SQLite writes fast?").metadata["results"] == 1


def test_an_empty_query_is_refused(search_settings, context):
    result = web_search(context, query="  ")

    assert not result.success
    assert "The query is empty" in result.content


# --- SearXNG -----------------------------------------------------------------------


def test_searxng(search_settings, context, provider_server):
    search_settings.SEARXNG_URL = provider_server.url + "/"
    search_settings.SEARCH_MAX_RESULTS = 2
    provider_server.reply(
        {
            "results": [
                {"title": "WAL", "url": "https://sqlite.org/wal.html", "content": "Write-ahead <log> & readers"},
                {"title": "", "url": "https://example.com/untitled"},
                {"title": "No URL, no source"},
                {"title": "Third", "url": "https://example.com/3", "content": "over the limit"},
            ]
        }
    )

    result = web_search(context, query="sqlite wal & readers")

    request = provider_server.requests[0]
    url = urlsplit(request["path"])
    assert (request["method"], url.path) == ("GET", "/search")
    assert parse_qs(url.query) == {"q": ["sqlite wal & readers"], "format": ["json"]}
    assert result.success
    assert result.content == (
        '<search_results provider="searxng" query="sqlite wal &amp; readers">'
        "<result><title>WAL</title><url>https://sqlite.org/wal.html</url>"
        "<snippet>Write-ahead &lt;log&gt; &amp; readers</snippet></result>"
        "<result><title>https://example.com/untitled</title><url>https://example.com/untitled</url>"
        "<snippet></snippet></result></search_results>"
    )
    assert result.output["sources"] == [
        {"title": "WAL", "url": "https://sqlite.org/wal.html", "excerpt": "Write-ahead <log> & readers"},
        {"title": "https://example.com/untitled", "url": "https://example.com/untitled", "excerpt": ""},
    ]


def test_no_web_results_ask_for_other_words(search_settings, context, provider_server):
    search_settings.SEARXNG_URL = provider_server.url

    result = web_search(context, query="photosynthesis")

    assert result.success
    assert result.content == (
        '<search_results provider="searxng" query="photosynthesis">No results. Try other or fewer words.</search_results>'
    )


# --- Tavily ------------------------------------------------------------------------


def test_tavily(search_settings, context, provider_server):
    search_settings.TAVILY_API_KEY = "tvly-test-key"
    search_settings.TAVILY_URL = provider_server.url
    search_settings.SEARCH_MAX_RESULTS = 5
    provider_server.reply(
        {
            "query": "solid-state batteries",
            "results": [
                {
                    "title": "Solid-state battery",
                    "url": "https://en.wikipedia.org/wiki/Solid-state_battery",
                    "content": "A battery with a solid electrolyte.",
                    "score": 0.9,
                },
            ],
        }
    )

    result = web_search(context, query="solid-state batteries")

    request = provider_server.requests[0]
    assert (request["method"], request["path"]) == ("POST", "/search")
    assert json.loads(request["body"]) == {
        "api_key": "tvly-test-key",
        "query": "solid-state batteries",
        "max_results": 5,
    }
    assert result.success
    assert result.metadata == {"provider": "tavily", "results": 1}
    assert result.content == (
        '<search_results provider="tavily" query="solid-state batteries">'
        "<result><title>Solid-state battery</title><url>https://en.wikipedia.org/wiki/Solid-state_battery</url>"
        "<snippet>A battery with a solid electrolyte.</snippet></result></search_results>"
    )


# --- Failures ----------------------------------------------------------------------


@pytest.fixture(params=["searxng", "tavily"])
def provider_at(request, search_settings):
    """Points the provider under test at a URL; returns its display name."""

    def point(url):
        search_settings.SEARCH_PROVIDER = request.param
        search_settings.SEARXNG_URL = url
        search_settings.TAVILY_URL = url
        search_settings.TAVILY_API_KEY = "tvly-test-key"
        return {"searxng": "SearXNG", "tavily": "Tavily"}[request.param]

    return point


def test_an_unreachable_provider_is_a_clear_error(provider_at, context, closed_port_url):
    name = provider_at(closed_port_url)

    result = web_search(context, query="anything")

    assert not result.success
    assert result.content.startswith(f'<error tool="web_search">{name} could not be reached: ')


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"<html>not json</html>", 200, "answered with something that is not JSON."),
        (b'["a list"]', 200, "answered JSON without a results list."),
        (b'{"results": "nope"}', 200, "answered JSON without a results list."),
        (b'{"error": "bad key"}', 401, "answered HTTP 401; the search failed."),
        (b"oops", 500, "answered HTTP 500; the search failed."),
    ],
)
def test_bad_answers_are_clear_errors(provider_at, context, provider_server, body, status, message):
    name = provider_at(provider_server.url)
    provider_server.reply(body, status=status)

    result = web_search(context, query="anything")

    assert not result.success
    assert result.content == f'<error tool="web_search">{name} {message}</error>'
