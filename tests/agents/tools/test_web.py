"""web_fetch against a real HTTP server on 127.0.0.1, and its refusals of
every address that is not public. Names that must resolve to private
addresses do so through a patched socket.getaddrinfo; no test sends a packet
off this machine (the guard fixture below makes sure of it)."""

import contextlib
import hashlib
import ipaddress
import socket
import ssl
import subprocess
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.utils import timezone

from agents.tools.base import CONFIRM, ToolContext
from agents.tools.web import MAX_URL_CHARS, WEB_FETCH_TOOL, FetchTarget, body_read_capped, fetch_target
from library.models import WebSnapshot
from tests.factories import ConversationFactory, pdf_bytes, pdf_sharing_one_stream

ARTICLE = """<!doctype html><html><head><title>Tides of the North Sea</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Tides of the North Sea</h1>
<p>The North Sea has a semi-diurnal tide: two high waters a day, each about twelve hours and
twenty-five minutes apart. Its range grows from under a metre off Norway to seven metres in the Wash.</p>
<p>Amphidromic points, where the range is nil, sit off Denmark, Norway and the Dutch coast; the tide
wave turns around them anticlockwise. See the <a href="https://example.org/tides">tide tables</a>.</p>
<p>Storm surges ride on top of the tide and caused the flood of 1953, which drowned 1,836 people.</p>
</article><footer>Copyright nobody</footer></body></html>"""


# A page whose text a test changes between two reads.
TODAY = {"html": ""}
TODAY_ZH = """<!doctype html><html><head><title>今日热泵价格</title></head><body><article><h1>今日热泵价格</h1>
<p>空气源热泵的安装价格为每千瓦一千二百元，比去年下降了百分之八。北方地区的补贴政策仍然有效，
申请需要提供安装合同和发票。</p></article></body></html>"""


# Pages drawing one 2.8 MB stream (14 KB): five pass the reader's limit, three
# are under it and take pypdf some 20 seconds.
SHARED_STREAM_PDF = pdf_sharing_one_stream(pages=5, content=b"0 0 m 1 1 l S\n" * 200_000)
SLOW_PDF = pdf_sharing_one_stream(pages=3, content=b"0 0 m 1 1 l S\n" * 200_000)


class _Site(BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            self._respond()
        except (BrokenPipeError, ConnectionResetError):
            pass  # web_fetch hangs up past FETCH_MAX_BYTES or its deadline

    def _respond(self):
        port = self.server.server_address[1]
        routes = {
            "/article": (200, "text/html; charset=utf-8", ARTICLE.encode()),
            "/report.pdf": (
                200,
                "application/pdf",
                pdf_bytes(["Mean tidal range at Den Helder is 1.4 m."], title="Tide report"),
            ),
            "/notes.txt": (
                200,
                "text/plain; charset=latin-1",
                "Café notes: <b>not markup</b> & more".encode("latin-1"),
            ),
            "/blank": (
                200,
                "text/html",
                b"<html><head><title>Loading</title></head><body><div id=app></div></body></html>",
            ),
            "/data.json": (200, "application/json", b'{"tide": "high"}'),
            "/huge.txt": (200, "text/plain", b"0123456789" * 100_000),
            "/logo.png": (200, "image/png", b"\x89PNG\r\n\x1a\n"),
            "/shared.pdf": (200, "application/pdf", SHARED_STREAM_PDF),
            "/slow.pdf": (200, "application/pdf", SLOW_PDF),
            "/host": (200, "text/plain", self.headers["Host"].encode()),
            "/today": (200, "text/html; charset=utf-8", TODAY["html"].encode()),
        }
        redirects = {
            "/hop/3": "/hop/2",
            "/hop/2": f"http://127.0.0.1:{port}/hop/1",
            "/hop/1": "/notes.txt",
            "/loop": "/loop",
            "/to-loopback": f"http://127.0.0.1:{port}/notes.txt",
            "/to-private": "http://10.0.0.1/admin",
            "/to-metadata": "http://169.254.169.254/latest/meta-data/",
            "/to-file": "file:///etc/passwd",
        }
        if self.path == "/slow":
            time.sleep(2)
        if self.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "30")
            self.end_headers()
            for _ in range(30):
                self.wfile.write(b".")
                self.wfile.flush()
                time.sleep(0.1)
            return
        if self.path in redirects:
            self.send_response(302)
            self.send_header("Location", redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = self.path.split("?")[0]
        status, content_type, body = routes.get(path, (404, "text/html", b"<h1>Not here</h1>"))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def stays_on_this_machine(monkeypatch):
    """Should a refusal ever fail, the fetch it let through must not reach a
    real private or public host: connections go to loopback addresses only,
    never to a name (web_fetch connects to the addresses it checked)."""
    create_connection = socket.create_connection

    def loopback_only(address, *args, **kwargs):
        try:
            loopback = ipaddress.ip_address(address[0]).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise OSError(f"test guard: no connection to {address[0]}")
        return create_connection(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", loopback_only)


@pytest.fixture
def fake_dns(monkeypatch):
    """Answers for made-up names; every other name resolves as usual."""
    answers = {}
    getaddrinfo = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host not in answers:
            return getaddrinfo(host, port, *args, **kwargs)
        addresses = answers[host]() if callable(answers[host]) else answers[host]
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port or 0))
            for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return answers


@pytest.fixture
def local_allowed(settings):
    settings.FETCH_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.FETCH_TIMEOUT = 5.0
    return settings


def fetch(url):
    return WEB_FETCH_TOOL.handler(ToolContext(artifacts=None), url=url)


def fetch_in(conversation, url):
    return WEB_FETCH_TOOL.handler(ToolContext(artifacts=None, conversation_id=conversation.pk), url=url)


@pytest.mark.django_db
def test_a_page_read_in_a_conversation_is_kept_as_it_was_read(site, local_allowed):
    conversation = ConversationFactory()
    TODAY["html"] = TODAY_ZH

    read = fetch_in(conversation, f"{site}/today")
    redirected = fetch_in(conversation, f"{site}/hop/3")

    chinese, notes = WebSnapshot.objects.order_by("pk")
    assert read.success and read.output["source"]["snapshot"] == chinese.pk
    assert (chinese.conversation, chinese.url, chinese.title) == (conversation, f"{site}/today", "今日热泵价格")
    assert chinese.content_type == "text/html"
    assert "每千瓦一千二百元" in chinese.text and "<p>" not in chinese.text
    assert chinese.digest == hashlib.sha256(chinese.text.encode()).hexdigest()
    assert chinese.size == len(chinese.text.encode())
    assert timezone.now() - chinese.fetched_at < timedelta(minutes=1)
    # Kept under the address it was read at, after the redirects: the one the model was told.
    assert redirected.output["source"]["snapshot"] == notes.pk
    assert (notes.url, notes.content_type, notes.text) == (
        f"{site}/notes.txt",
        "text/plain",
        "Café notes: <b>not markup</b> & more",
    )


@pytest.mark.django_db
def test_a_page_read_again_alike_is_one_snapshot_and_changed_another(site, local_allowed):
    conversation, other = ConversationFactory(), ConversationFactory()
    TODAY["html"] = ARTICLE
    first = fetch_in(conversation, f"{site}/today")
    again = fetch_in(conversation, f"{site}/today")
    elsewhere = fetch_in(other, f"{site}/today")
    TODAY["html"] = ARTICLE.replace("1,836 people", "1,835 people")
    changed = fetch_in(conversation, f"{site}/today")

    snapshots = [result.output["source"]["snapshot"] for result in (first, again, elsewhere, changed)]
    assert snapshots[0] == snapshots[1]
    assert len(set(snapshots)) == 3
    assert WebSnapshot.objects.filter(conversation=conversation).count() == 2
    assert "1,835 people" in WebSnapshot.objects.get(pk=snapshots[3]).text


@pytest.mark.django_db
def test_past_the_conversations_bound_a_page_is_read_but_not_kept(site, local_allowed):
    conversation = ConversationFactory()
    local_allowed.SNAPSHOTS_MAX_BYTES = 150_000
    kept = fetch_in(conversation, f"{site}/notes.txt")
    huge = fetch_in(conversation, f"{site}/huge.txt")

    assert "snapshot" in kept.output["source"]
    assert huge.success and "0123456789" in huge.content
    assert "snapshot" not in huge.output["source"]
    assert WebSnapshot.objects.filter(conversation=conversation).count() == 1


@pytest.mark.django_db
def test_a_fetch_outside_a_turn_keeps_nothing(site, local_allowed):
    result = fetch(f"{site}/article")

    assert result.success and "snapshot" not in result.output["source"]
    assert not WebSnapshot.objects.exists()


def test_the_tool_asks_for_a_url_and_confirmation():
    assert WEB_FETCH_TOOL.name == "web_fetch"
    assert WEB_FETCH_TOOL.permission == CONFIRM
    assert WEB_FETCH_TOOL.parameters["required"] == ["url"]


def test_an_article_is_read_as_markdown_with_its_links(site, local_allowed):
    result = fetch(f"{site}/article")

    assert result.success, result.content
    assert result.content.startswith(
        f'<page url="{site}/article" status="200" content_type="text/html" title="Tides of the North Sea"'
    )
    assert "semi-diurnal tide" in result.content
    assert "[tide tables](https://example.org/tides)" in result.content
    assert "Copyright nobody" not in result.content  # boilerplate left out
    assert result.metadata == {"url": f"{site}/article", "status": 200, "bytes": len(ARTICLE.encode())}
    source = result.output["source"]
    assert (source["title"], source["url"]) == ("Tides of the North Sea", f"{site}/article")
    assert "semi-diurnal tide" in source["excerpt"] and "\n" not in source["excerpt"]


def test_a_page_without_text_is_read_as_empty(site, local_allowed):
    # trafilatura finds no main text in an app shell and returns None.
    result = fetch(f"{site}/blank")

    assert result.success, result.content
    assert 'title="Loading"><content></content></page>' in result.content


def test_a_pdf_is_read_as_text(site, local_allowed):
    result = fetch(f"{site}/report.pdf")

    assert result.success, result.content
    assert 'content_type="application/pdf" title="Tide report"' in result.content
    assert "Mean tidal range at Den Helder is 1.4 m." in result.content


def test_a_pdf_whose_pages_share_one_large_stream_is_refused_in_time(site, local_allowed):
    started = time.perf_counter()

    result = fetch(f"{site}/shared.pdf")

    assert not result.success
    assert "could not read this PDF: This PDF's pages hold more than 10 MB" in result.content
    # A quarter of a second here; its 14 MB of drawing would take pypdf half a minute.
    assert time.perf_counter() - started < 15


def test_a_pdf_that_takes_too_long_stops_its_reader_not_the_worker(site, local_allowed, settings):
    settings.EXTRACT_TIMEOUT = 1

    result = fetch(f"{site}/slow.pdf")

    assert not result.success
    assert "could not read this PDF: This PDF took too long to read (over 1 seconds)" in result.content


def test_text_is_decoded_by_its_charset_and_escaped(site, local_allowed):
    result = fetch(f"{site}/notes.txt")

    assert result.success, result.content
    assert "<content>Café notes: &lt;b&gt;not markup&lt;/b&gt; &amp; more</content>" in result.content


def test_json_is_read_as_text(site, local_allowed):
    result = fetch(f"{site}/data.json")

    assert result.success
    assert '<content>{"tide": "high"}</content>' in result.content


def test_a_huge_body_is_cut_and_says_so(site, local_allowed):
    local_allowed.FETCH_MAX_BYTES = 1000

    result = fetch(f"{site}/huge.txt")

    assert result.success
    assert 'truncated="true"' in result.content
    assert "cut at 1000 bytes" in result.content
    assert result.metadata["bytes"] == 1000
    assert "0123456789" * 100 + "</content>" in result.content


def test_an_unreadable_type_is_an_error(site, local_allowed):
    result = fetch(f"{site}/logo.png")

    assert not result.success
    assert result.content == f'<error tool="web_fetch">cannot read content type image/png at {site}/logo.png</error>'


def test_redirects_are_followed_to_the_final_url(site, local_allowed):
    result = fetch(f"{site}/hop/3")

    assert result.success, result.content
    assert f'url="{site}/notes.txt"' in result.content
    assert result.metadata["url"] == f"{site}/notes.txt"
    assert result.output["source"]["url"] == f"{site}/notes.txt"


def test_too_many_redirects_is_an_error(site, local_allowed):
    local_allowed.FETCH_MAX_REDIRECTS = 2

    assert "too many redirects: gave up after 2" in fetch(f"{site}/loop").content
    assert fetch(f"{site}/hop/3").success is False  # three hops > 2
    local_allowed.FETCH_MAX_REDIRECTS = 3
    assert fetch(f"{site}/hop/3").success


def test_http_errors_are_reported(site, local_allowed):
    result = fetch(f"{site}/missing")

    assert not result.success
    assert f"{site}/missing answered HTTP 404 Not Found" in result.content
    assert result.output == {"kind": "error", "message": f"{site}/missing answered HTTP 404 Not Found"}


def test_a_slow_server_times_out(site, local_allowed):
    local_allowed.FETCH_TIMEOUT = 0.3

    started = time.monotonic()
    result = fetch(f"{site}/slow")

    assert not result.success
    assert "timed out after 0.3 seconds" in result.content
    assert time.monotonic() - started < 1.5


def test_a_dripping_server_cannot_outlast_the_timeout(site, local_allowed):
    # Each byte comes well within the read timeout; the whole body would not.
    local_allowed.FETCH_TIMEOUT = 0.5

    started = time.monotonic()
    result = fetch(f"{site}/drip")

    assert not result.success
    assert "timed out after 0.5 seconds" in result.content
    assert time.monotonic() - started < 1.5


def test_an_unreachable_host_is_reported(local_allowed):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]

    result = fetch(f"http://127.0.0.1:{port}/")

    assert not result.success
    assert f"could not fetch http://127.0.0.1:{port}/" in result.content


def test_an_unknown_name_is_reported(fake_dns):
    fake_dns["nowhere.example"] = []

    result = fetch("http://nowhere.example/")

    assert not result.success
    assert "could not resolve host nowhere.example" in result.content


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://127.0.0.1/", "127.0.0.1 is a loopback address"),
        ("http://localhost:8000/", "localhost, which resolves to 127.0.0.1, is a loopback address"),
        ("http://2130706433/", "which resolves to 127.0.0.1, is a loopback address"),
        ("http://10.0.0.1/", "10.0.0.1 is a private address"),
        ("https://192.168.1.1/", "192.168.1.1 is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is the cloud metadata address"),
        ("http://169.254.1.1/", "169.254.1.1 is a link-local address"),
        ("http://100.64.0.1/", "a shared (carrier-grade NAT) address"),
        ("http://0.0.0.0/", "0.0.0.0 is the unspecified address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
        ("http://[::1]/", "::1 is a loopback address"),
        ("http://[fd00::1]/", "fd00::1 is a private address"),
        ("http://[fe80::1]/", "fe80::1 is a link-local address"),
        ("http://[::ffff:127.0.0.1]/", "an IPv6 form of 127.0.0.1, a loopback address"),
        ("http://[::ffff:a00:1]/", "an IPv6 form of 10.0.0.1, a private address"),
        ("http://[2002:a00:1::]/", "an IPv6 form of 10.0.0.1, a private address"),
        ("http://[64:ff9b::a9fe:a9fe]/", "an IPv6 form of 169.254.169.254, the cloud metadata address"),
    ],
)
def test_non_public_addresses_are_refused(url, reason):
    result = fetch(url)

    assert not result.success
    assert result.content.startswith(f'<error tool="web_fetch">refused {url}: ')
    assert reason in result.content
    assert "web_fetch only reads public internet addresses" in result.content


@pytest.mark.parametrize("url", ["ftp://example.com/file.txt", "file:///etc/passwd", "gopher://example.com/"])
def test_other_schemes_are_refused(url):
    result = fetch(url)

    assert not result.success
    assert "only http and https URLs can be fetched" in result.content


def test_a_public_looking_name_with_a_private_address_is_refused(fake_dns):
    fake_dns["intranet.example.com"] = ["10.1.2.3"]

    result = fetch("https://intranet.example.com/wiki")

    assert "intranet.example.com, which resolves to 10.1.2.3, is a private address" in result.content


def test_a_name_with_one_private_address_among_public_ones_is_refused(fake_dns):
    fake_dns["mixed.example.com"] = ["93.184.216.34", "2606:2800:220:1::1", "10.1.2.3"]

    result = fetch("https://mixed.example.com/")

    assert not result.success
    assert "mixed.example.com, which resolves to 10.1.2.3, is a private address" in result.content


@pytest.mark.parametrize(
    "path, target",
    [
        ("/to-private", "refused http://10.0.0.1/admin: 10.0.0.1 is a private address"),
        (
            "/to-metadata",
            "refused http://169.254.169.254/latest/meta-data/: 169.254.169.254 is the cloud metadata address",
        ),
        ("/to-file", "only http and https URLs can be fetched, not file scheme"),
    ],
)
def test_a_redirect_out_of_an_allowed_host_is_checked_again(site, local_allowed, path, target):
    result = fetch(f"{site}{path}")

    assert not result.success
    assert target in result.content


def test_a_redirect_to_a_host_that_is_not_allowed_is_refused(site, settings):
    # localhost is allowed by name; the redirect names 127.0.0.1, which is not.
    settings.FETCH_ALLOWED_HOSTS = ["localhost"]
    port = site.rsplit(":", 1)[1]

    assert fetch(f"http://localhost:{port}/notes.txt").success
    result = fetch(f"http://localhost:{port}/to-loopback")

    assert not result.success
    assert f"refused http://127.0.0.1:{port}/notes.txt: 127.0.0.1 is a loopback address" in result.content


def test_connects_to_the_checked_address(site, settings, fake_dns):
    """DNS rebinding: the name answers a checked address once, then nothing
    (or somewhere else). The connection must use the first answer, while the
    server still sees the name in the Host header."""
    settings.FETCH_ALLOWED_HOSTS = ["rebind.example"]
    answers = iter([["127.0.0.1"]])
    fake_dns["rebind.example"] = lambda: next(answers, [])
    port = site.rsplit(":", 1)[1]

    result = fetch(f"http://rebind.example:{port}/host")

    assert result.success, result.content
    assert f"<content>rebind.example:{port}</content>" in result.content


@pytest.mark.processes
def test_tls_to_the_checked_address_still_asks_for_the_name(settings, fake_dns, tmp_path):
    """Over https the connection goes to the checked address too, and the
    handshake names the URL's host (SNI), which the certificate is checked against."""
    settings.FETCH_ALLOWED_HOSTS = ["rebind.example"]
    answers = iter([["127.0.0.1"]])
    fake_dns["rebind.example"] = lambda: next(answers, [])
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=rebind.example", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    asked = []
    context.sni_callback = lambda sock, name, ctx: asked.append(name)
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def handshake():
            client, _ = listener.accept()
            with client, contextlib.suppress(OSError):
                context.wrap_socket(client, server_side=True).close()

        server = threading.Thread(target=handshake, daemon=True)
        server.start()
        result = fetch(f"https://rebind.example:{listener.getsockname()[1]}/")
        server.join(timeout=5)

    # The certificate is self-signed: no trusted authority vouches for the name.
    assert not result.success and "CERTIFICATE_VERIFY_FAILED" in result.content, result.content
    assert asked == ["rebind.example"]


# Each a URL another reader (a browser, a proxy, the person approving it) could
# take for another host than httpx does, or that hides what it says.
USER_PART = "it holds a user name or password before its host (user@host), which web_fetch never sends"
AMBIGUOUS_URLS = [
    ("https://user:secret@example.com/", USER_PART),
    ("https://en.wikipedia.org@127.0.0.1:8403/page", USER_PART),
    ("https://en.wikipedia.org:443@example.com/", USER_PART),
    ("https://@example.com/", USER_PART),
    ("https://:@example.com/", USER_PART),
    ("https://a@b@example.com/", USER_PART),
    ("https://en.wikipedia.org%2Fwiki%2FHeat_pump%3Fx%3D1@example.com/page?exfil=1", USER_PART),
    ("https://en.wikipedia.org\\wiki\\Heat_pump@example.com/", USER_PART),
    # httpx: the host after the @; a browser: 127.0.0.1, the backslash a slash.
    ("https://127.0.0.1:8403\\@en.wikipedia.org/wiki/Heat_pump", USER_PART),
    ("https://example.com\\.wikipedia.org/", "a backslash before its path, which browsers read as a slash"),
    ("https://en.wikipedia.org%40example.com/", "its host en.wikipedia.org%40example.com holds characters no host"),
    ("https://ex%61mple.com/", "its host ex%61mple.com holds characters no host name has"),
    ("https://exa mple.com/", "its host exa%20mple.com holds characters no host name has"),
    # What is left of a long user part cut short by a log: no host name is this long.
    ("https://en.wikipedia.org.wiki.Heat_pump." + "a" * 1960, "its host is longer than a host name can be"),
    ("https://example.com/\u202egnp.exe", "the invisible or control character U+202E"),
    ("https://example.com/pa\u200bge", "the invisible or control character U+200B"),
    ("https://example.com/\u00adpage", "the invisible or control character U+00AD"),
    ("https://example.com/" + "热泵" * 4100, f"web_fetch reads URLs of up to {MAX_URL_CHARS:,} characters"),
]


@pytest.mark.parametrize("url, reason", AMBIGUOUS_URLS)
def test_a_url_that_could_be_read_as_naming_another_host_is_refused_before_any_lookup(url, reason, monkeypatch):
    looked_up = []

    def resolve(host, *args, **kwargs):
        looked_up.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", resolve)

    result = fetch(url)

    assert not result.success
    assert result.content.startswith('<error tool="web_fetch">refused ')
    assert reason in result.content
    assert looked_up == []
    # The person asked to approve it is told so.
    assert reason in fetch_target(url).refused


def test_long_urls_in_other_scripts_are_read(site, local_allowed):
    url = f"{site}/notes.txt?q=" + "热泵效率" * 1000 + "#@10.0.0.1/admin"

    result = fetch(url)

    assert result.success, result.content
    assert "Café notes" in result.content


@pytest.mark.parametrize(
    "url, target",
    [
        ("https://en.wikipedia.org/wiki/Heat_pump", FetchTarget("en.wikipedia.org", "", "")),
        ("HTTPS://EN.Wikipedia.ORG:8443/x", FetchTarget("en.wikipedia.org:8443", "", "")),
        # Look-alikes in other scripts are spelt as DNS is asked for them.
        ("https://аррӏе.com/", FetchTarget("аррӏе.com", "xn--80ak6aa92e.com", "")),
        ("https://xn--80ak6aa92e.com/", FetchTarget("аррӏе.com", "xn--80ak6aa92e.com", "")),
        ("https://热泵.中国/", FetchTarget("热泵.中国", "xn--kxwp8f.xn--fiqs8s", "")),
        ("http://[::ffff:127.0.0.1]:8080/", FetchTarget("[::ffff:127.0.0.1]:8080", "", "")),
        ("https://en.wikipedia.org@127.0.0.1:8403/", FetchTarget("127.0.0.1:8403", "", USER_PART)),
        ("https://127.0.0.1:8403\\@en.wikipedia.org/", FetchTarget("en.wikipedia.org", "", USER_PART)),
        ("https://[::1/", FetchTarget("", "", "not a valid URL (Invalid port: ':1')")),
    ],
)
def test_the_target_shown_for_approval_is_the_host_the_fetch_reads(url, target):
    assert fetch_target(url) == target


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b"abcd", b"ef"], (b"abcd", True)),  # a chunk ends at the limit and more follows
        ([b"ab", b"cdef"], (b"abcd", True)),
        ([b"ab", b"cd"], (b"abcd", False)),  # exactly the limit, and no more
        ([b"abc"], (b"abc", False)),
    ],
    ids=["chunk-at-limit", "chunk-past-limit", "whole-at-limit", "under"],
)
def test_a_capped_read_says_it_was_cut_only_when_more_followed(chunks, expected):
    response = httpx.Response(200, content=iter(chunks))

    assert body_read_capped(response, deadline=time.monotonic() + 10, limit=4) == expected
