"""web_fetch: the crawl agent reads one web page, PDF or text file as text.

The model chooses the URL, and a page it read may have chosen it for the
model, so the fetch runs on the server with the server's network position.
Left alone it would read cloud metadata (169.254.169.254), admin panels on
the intranet and services on localhost. So every hop, the first URL and each
redirect, is checked before any connection: http(s) only, and every address
the name resolves to must be a public one. The connection then goes to the
address that was checked, not to a second DNS answer (rebinding). Bodies are
read as a stream and cut at FETCH_MAX_BYTES, and the whole fetch has a
deadline, so a huge or dripping response cannot hold the worker.

`library://` URLs name documents of the team library and never go over HTTP.
"""

import ipaddress
import re
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

import httpx
import trafilatura
from django.conf import settings

from artifactflow.documents import PAGE_BREAK, DocumentError, DocumentUnreadableError, PdfLockedError, pdf_first_pages
from artifactflow.extraction import document_read
from library.models import LIBRARY_URL_PREFIX, LibraryDocument
from library.selectors import library_documents, library_url_id, library_url_passage
from library.services import snapshot_keep

from ..event_schema import PageOutput
from .base import CONFIRM, Tool, ToolContext, ToolResult, source_data, tool_error

# The engine stores a long result as an artifact for the model to page
# through; this only bounds that artifact, against a multi-megabyte text file.
MAX_CHARS = 200_000
PDF_MAX_PAGES = 100
# A library search hit's passage is read with this many on each side of it:
# enough for the context of a sentence, far less than a 200-page document.
PASSAGES_AROUND = 1
WEB_FETCH = "web_fetch"
_REDIRECTS = {301, 302, 303, 307, 308}
_METADATA_ADDRESSES = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_TEXT_TYPES = {"application/json", "application/xml", "application/javascript", "application/x-ndjson"}
# Servers commonly refuse a request line over 8 KB: a longer URL names no page.
MAX_URL_CHARS = 8192
# A host as DNS is asked for it (IDNA-encoded); IP literals are checked apart.
_HOST_NAME = re.compile(r"[a-z0-9_.-]+")


class FetchError(Exception):
    """A fetch we refuse or that failed; the message is for the model."""


@dataclass(frozen=True)
class FetchedPage:
    """A page as web_fetch read it: its text, and notes on what was left out."""

    url: str
    status: int
    content_type: str
    title: str
    text: str
    notes: list[str]
    bytes: int


def url_parse(url: str) -> httpx.URL:
    """`url` as the fetch reads it, or FetchError saying why web_fetch refuses
    it before any lookup."""
    parsed, refusal = _url_read(url)
    if refusal:
        shown = url if len(url) <= MAX_URL_CHARS else f"a URL of {len(url):,} characters"
        raise FetchError(f"refused {shown}: {refusal}")
    return parsed


def _url_read(url: str) -> tuple[httpx.URL | None, str]:
    """`url` as httpx reads it (None when it cannot), and why web_fetch
    refuses it ("" when it does not). The person who approves a fetch is shown
    the host this parse finds (fetch_target), so nothing passes that another
    parser (a browser, a proxy, the person reading) could take for another
    host: no user part before the host however spelt, no backslash there, no
    percent sign in the host, no invisible characters."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        return None, f"not a valid URL ({error})"
    if len(url) > MAX_URL_CHARS:
        return parsed, f"web_fetch reads URLs of up to {MAX_URL_CHARS:,} characters"
    hidden = next((char for char in url if not char.isprintable()), None)
    if hidden is not None:
        return parsed, f"it holds the invisible or control character U+{ord(hidden):04X}"
    if parsed.scheme not in ("http", "https"):
        return parsed, f"only http and https URLs can be fetched, not {parsed.scheme or 'no'} scheme"
    if not parsed.host:
        return parsed, "the URL has no host"
    # The authority as the standard library reads it too: httpx drops an empty
    # user part ("https://@host"), and a browser ends the authority at a
    # backslash where httpx reads on to an "@".
    authority = urlsplit(url).netloc
    if parsed.userinfo or "@" in authority:
        return parsed, "it holds a user name or password before its host (user@host), which web_fetch never sends"
    if "\\" in authority:
        return parsed, "it holds a backslash before its path, which browsers read as a slash"
    host = parsed.raw_host.decode("ascii")
    if not (_HOST_NAME.fullmatch(host) or _ip_literal(host)):
        return parsed, f"its host {parsed.host} holds characters no host name has"
    if len(host) > 253 or any(len(label) > 63 for label in host.split(".")):
        return parsed, "its host is longer than a host name can be (253 characters, 63 between dots)"
    return parsed, ""


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class FetchTarget:
    """Where web_fetch would go for a URL, for the person asked to approve it."""

    # The host as people read it (a name in other scripts in them), with the
    # port when the URL names one; empty when the URL has none to read.
    host: str
    # The host as DNS is asked for it, when that is spelt otherwise: a name
    # that looks like another shows here as what it is.
    ascii_host: str
    # Why web_fetch will refuse the URL, whoever approves it.
    refused: str


def fetch_target(url: str) -> FetchTarget:
    """The host `url` names as the fetch reads it (the same parse), and why
    web_fetch will refuse it, if it will."""
    parsed, refusal = _url_read(url)
    if parsed is None or not parsed.host:
        return FetchTarget(host="", ascii_host="", refused=refusal)
    host, ascii_host = parsed.host, parsed.raw_host.decode("ascii")
    if ":" in host:
        host, ascii_host = f"[{host}]", f"[{ascii_host}]"
    port = f":{parsed.port}" if parsed.port is not None else ""
    return FetchTarget(host=host + port, ascii_host=ascii_host + port if ascii_host != host else "", refused=refusal)


def url_check(url: str) -> list[str]:
    """The addresses `url` may be fetched from, or FetchError saying why none."""
    parsed = url_parse(url)
    try:
        infos = socket.getaddrinfo(parsed.host, parsed.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise FetchError(f"could not resolve host {parsed.host}: {error}") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if parsed.host.lower() in {host.lower() for host in settings.FETCH_ALLOWED_HOSTS}:
        return addresses
    for address in addresses:
        # A name with one private address among public ones is refused whole:
        # which address a client uses is not ours to choose.
        reason = _non_public(ipaddress.ip_address(address.split("%")[0]))
        if reason:
            shown = parsed.host if parsed.host == address else f"{parsed.host}, which resolves to {address},"
            raise FetchError(f"refused {url}: {shown} is {reason}; web_fetch only reads public internet addresses")
    return addresses


def _non_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why `ip` is no public address, or None when it is one."""
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv6 forms that carry an IPv4 address reach that address.
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            reason = _non_public(embedded)
            return f"an IPv6 form of {embedded}, {reason}" if reason else None
    if ip in _METADATA_ADDRESSES:
        return "the cloud metadata address"
    checks = [
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.version == 4 and ip in _SHARED, "a shared (carrier-grade NAT) address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    ]
    return next((reason for failed, reason in checks if failed), None)


class _PinnedTransport(httpx.BaseTransport):
    """Connects to the addresses url_check approved, whatever the name resolves
    to by now: the request goes to an address in place of the URL's host, while
    the Host header and TLS (the server name sent and the one the certificate is
    checked against, httpcore's sni_hostname) keep the URL's name."""

    def __init__(self, *, addresses: list[str]):
        self._addresses = addresses
        self._transport = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        refused = None
        for address in self._addresses:
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=address),
                headers=request.headers,
                stream=request.stream,
                extensions={**request.extensions, "sni_hostname": request.url.raw_host.decode("ascii")},
            )
            try:
                return self._transport.handle_request(pinned)
            except httpx.ConnectError as error:
                refused = error
        raise refused

    def close(self) -> None:
        self._transport.close()


def web_fetch(context: ToolContext, *, url: str) -> ToolResult:
    if url.strip().lower().startswith(LIBRARY_URL_PREFIX):
        return library_document_fetch(url=url, user=context.user, project=context.project_id)
    try:
        page = _fetch(url=url)
    except FetchError as error:
        return tool_error(tool=WEB_FETCH, message=str(error))
    snapshot = None
    if context.conversation_id is not None:
        # Kept as read, for a citation of the page to open (library.views).
        snapshot = snapshot_keep(
            conversation_id=context.conversation_id,
            url=page.url,
            title=page.title,
            content_type=page.content_type,
            text=page.text,
        )
    return _page_result(page, snapshot=snapshot.pk if snapshot is not None else None)


def _fetch(*, url: str) -> FetchedPage:
    deadline = time.monotonic() + settings.FETCH_TIMEOUT
    for _ in range(settings.FETCH_MAX_REDIRECTS + 1):
        addresses = url_check(url)
        # trust_env=False: through a proxy from the environment the proxy
        # would resolve the name itself and skip the check above.
        with httpx.Client(
            transport=_PinnedTransport(addresses=addresses), timeout=settings.FETCH_TIMEOUT, trust_env=False
        ) as client:
            try:
                with client.stream("GET", url, headers={"User-Agent": "ArtifactFlow web_fetch"}) as response:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        url = str(response.url.join(location))
                        continue
                    if response.status_code >= 400:
                        raise FetchError(f"{url} answered HTTP {response.status_code} {response.reason_phrase}")
                    body, cut = body_read_capped(response, deadline=deadline, limit=settings.FETCH_MAX_BYTES)
            except httpx.TimeoutException:
                raise FetchError(f"{url} timed out after {settings.FETCH_TIMEOUT:g} seconds") from None
            except httpx.HTTPError as error:
                raise FetchError(f"could not fetch {url}: {error or type(error).__name__}") from None
        return _page(url=url, response=response, body=body, cut=cut)
    raise FetchError(f"too many redirects: gave up after {settings.FETCH_MAX_REDIRECTS}, at {url}")


def body_read_capped(response: httpx.Response, *, deadline: float, limit: int) -> tuple[bytes, bool]:
    """The body up to `limit` bytes (after decompression, so a small gzip
    cannot inflate past it), and whether it was cut."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        # Past the limit, not at it: a chunk ending exactly at the limit says
        # nothing of whether more follows.
        if size > limit:
            return b"".join(chunks)[:limit], True
        # The read timeout is per chunk; a server dripping a byte at a time
        # would never trip it.
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the whole call took too long")
    return b"".join(chunks), False


def _page(*, url: str, response: httpx.Response, body: bytes, cut: bool) -> FetchedPage:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    charset = response.charset_encoding or "utf-8"
    if content_type in ("text/html", "application/xhtml+xml"):
        title, text = _html_text(body.decode(charset, errors="replace"), url=url)
    elif content_type == "application/pdf":
        title, text = _pdf_text(body, cut=cut)
    elif content_type.startswith("text/") or content_type in _TEXT_TYPES or content_type.endswith(("+json", "+xml")):
        title, text = "", body.decode(charset, errors="replace")
    else:
        raise FetchError(f"cannot read content type {content_type or 'unknown (none given)'} at {url}")
    notes = []
    if cut:
        notes.append(f"The body was cut at {len(body)} bytes; the rest was not read.")
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS]
        notes.append(f"The text was cut at {MAX_CHARS} characters.")
    return FetchedPage(
        url=url,
        status=response.status_code,
        content_type=content_type,
        title=title,
        text=text,
        notes=notes,
        bytes=len(body),
    )


def _page_result(page: FetchedPage, *, snapshot: int | None) -> ToolResult:
    truncated, note = (' truncated="true"', f"<note>{escape(' '.join(page.notes))}</note>") if page.notes else ("", "")
    source = source_data(title=page.title, url=page.url, text=page.text)
    if snapshot is not None:
        source["snapshot"] = snapshot
    return ToolResult(
        success=True,
        content=(
            f'<page url={quoteattr(page.url)} status="{page.status}" content_type={quoteattr(page.content_type)} '
            f"title={quoteattr(page.title)}{truncated}>{note}<content>{escape(page.text)}</content></page>"
        ),
        output=PageOutput(kind="page", source=source),
        metadata={"url": page.url, "status": page.status, "bytes": page.bytes},
    )


def _html_text(html: str, *, url: str) -> tuple[str, str]:
    metadata = trafilatura.extract_metadata(html)
    title = (metadata.title if metadata else None) or ""
    # No main text found (a link hub, an app shell): all visible text beats nothing.
    text = trafilatura.extract(
        html, url=url, output_format="markdown", include_links=True, include_tables=True
    ) or trafilatura.html2txt(html)
    return title, text or ""


def _pdf_text(body: bytes, *, cut: bool) -> tuple[str, str]:
    """Read in a limited child process, so a crafted PDF cannot hold the worker."""
    try:
        pdf = document_read(read=pdf_first_pages, data=body, max_pages=PDF_MAX_PAGES, max_chars=MAX_CHARS)
    except PdfLockedError:
        raise FetchError("this PDF is protected by a password") from None
    except DocumentUnreadableError as error:
        hint = " (the file was cut at FETCH_MAX_BYTES)" if cut else ""
        raise FetchError(f"could not read this PDF{hint}: {error.reason}") from None
    except DocumentError as error:
        raise FetchError(f"could not read this PDF: {error}") from None
    return pdf.title, pdf.text


WEB_FETCH_TOOL = Tool(
    name=WEB_FETCH,
    description=(
        "Fetch one public web page, PDF or text file and read it as text (HTML becomes markdown). "
        "Also reads team library documents by their library:// URL: a search hit's library://9#3 is the "
        "passage it found with those around it, library://9 the whole document. "
        "Private and local addresses are refused."
    ),
    parameters={
        "type": "object",
        "properties": {"url": {"type": "string", "description": "An http(s):// or library:// URL"}},
        "required": ["url"],
    },
    handler=web_fetch,
    permission=CONFIRM,
)


def library_document_fetch(*, url: str, user=None, project: int | None = None) -> ToolResult:
    """A library document `user` may read (in the turn's `project` too), for
    web_fetch, which hands library:// URLs here. One the user may not read is one that does not exist."""
    document_id = library_url_id(url)
    if document_id is None:
        return tool_error(
            tool="web_fetch", message=f"{url} is not a library URL; they look like {LIBRARY_URL_PREFIX}12."
        )
    document = library_documents(user=user, project=project).filter(pk=document_id).first()
    if document is None:
        return tool_error(
            tool="web_fetch", message=f"There is no library document {url}; search the library for its current URL."
        )
    if document.status != LibraryDocument.Status.INDEXED:
        why = "is still being read" if document.status == LibraryDocument.Status.QUEUED else "could not be read"
        return tool_error(tool="web_fetch", message=f"The library document {document.url} {why}; it has no text yet.")
    number = library_url_passage(url)
    if number is not None:
        return _library_passages_fetch(document=document, number=number)
    return ToolResult(
        success=True,
        content=(
            f"<page url={quoteattr(document.url)} title={quoteattr(document.title)} "
            f"content_type={quoteattr(document.content_type)}><content>{escape(document.content.replace(PAGE_BREAK, ''))}</content></page>"
        ),
        output=PageOutput(
            kind="page", source=source_data(title=document.title, url=document.url, text=document.content)
        ),
        metadata={"url": document.url, "title": document.title},
    )


def _library_passages_fetch(*, document, number: int) -> ToolResult:
    """The passage a library search found, with those around it, and where they are in the document."""
    around = list(document.passages.filter(number__gte=number - PASSAGES_AROUND, number__lte=number + PASSAGES_AROUND))
    count = document.passages.count()
    if not any(passage.number == number for passage in around):
        return tool_error(
            tool="web_fetch",
            message=f"{document.url} has {count} passages; #{number} is none of them. Read {document.url} whole.",
        )
    url = f"{document.url}#{number}"
    passages = "".join(
        f"<passage number={quoteattr(str(passage.number))} section={quoteattr(passage.heading)}"
        + (f" page={quoteattr(str(passage.page))}" if passage.page else "")
        + f">{escape(passage.text)}</passage>"
        for passage in around
    )
    text = "\n\n".join(passage.text for passage in around)
    return ToolResult(
        success=True,
        content=(
            f"<page url={quoteattr(url)} title={quoteattr(document.title)} "
            f"content_type={quoteattr(document.content_type)} "
            f"passages={quoteattr(f'{around[0].number}-{around[-1].number} of {count}')}>"
            f"<content>{passages}</content>"
            f"<more>Read the passages before or after as {document.url}#N, the whole document as {document.url}.</more>"
            "</page>"
        ),
        output=PageOutput(
            kind="page",
            source=source_data(
                title=document.title, url=url, text=text, section=around[0].heading, page=around[0].page
            ),
        ),
        metadata={"url": url, "title": document.title},
    )
