"""web_search: one tool, three providers.

SearXNG (self-hosted, keyless) or Tavily (hosted, keyed) search the web; the
local provider searches the team library, so a machine with neither, or with
no internet at all, still gives the search agent sources to work from.
"""

from xml.sax.saxutils import escape, quoteattr

import httpx
from django.conf import settings

from library.selectors import SearchHit, library_search

from ..event_schema import SourcesOutput
from .base import AUTO, Tool, ToolContext, ToolResult, source_data, tool_error

WEB_SEARCH = "web_search"
PROVIDERS = ("searxng", "tavily", "local")
# The library keeps only relevant documents (library.selectors), so no hits
# means no document covers the subject: the model is to say that, not
# answer as if it had a source.
NOTHING_IN_LIBRARY = (
    "Nothing in the team library matches this query. Search once more with only the subject's key terms; "
    "if that finds nothing either, say plainly that the team library has nothing on it."
)


class SearchError(Exception):
    """A search that could not be made; the message is for the model."""


def search_provider() -> str:
    """The configured provider, else the best one the settings make usable."""
    if settings.SEARCH_PROVIDER:
        return settings.SEARCH_PROVIDER
    if settings.SEARXNG_URL:
        return "searxng"
    if settings.TAVILY_API_KEY:
        return "tavily"
    return "local"


def web_search(context: ToolContext, *, query: str) -> ToolResult:
    provider = search_provider()
    query = query.strip()
    if not query:
        return tool_error(tool=WEB_SEARCH, message="The query is empty; say what to search for.")
    try:
        hits = _search(
            provider=provider,
            query=query,
            limit=settings.SEARCH_MAX_RESULTS,
            user=context.user,
            project=context.project_id,
        )
    except SearchError as error:
        return tool_error(tool=WEB_SEARCH, message=str(error))
    results = "".join(
        f"<result><title>{escape(hit.title)}</title><url>{escape(hit.url)}</url>"
        f"<snippet>{escape(hit.snippet)}</snippet></result>"
        for hit in hits
    )
    output = SourcesOutput(
        kind="sources",
        sources=[
            source_data(title=hit.title, url=hit.url, text=hit.snippet, section=hit.heading, page=hit.page)
            for hit in hits
        ],
    )
    if not hits:
        results = output["message"] = (
            NOTHING_IN_LIBRARY if provider == "local" else "No results. Try other or fewer words."
        )
    return ToolResult(
        success=True,
        content=f"<search_results provider={quoteattr(provider)} query={quoteattr(query)}>{results}</search_results>",
        output=output,
        metadata={"provider": provider, "results": len(hits)},
    )


def _search(*, provider: str, query: str, limit: int, user, project: int | None) -> list[SearchHit]:
    if provider == "local":
        # What the conversation's owner may read (in its project too): an agent finds no more than its user.
        return library_search(query=query, limit=limit, user=user, project=project)
    if provider == "searxng":
        return _searxng(query=query, limit=limit)
    if provider == "tavily":
        return _tavily(query=query, limit=limit)
    raise SearchError(
        f"Unknown search provider {provider!r}; set ARTIFACTFLOW_SEARCH_PROVIDER to one of {', '.join(PROVIDERS)}."
    )


def _searxng(*, query: str, limit: int) -> list[SearchHit]:
    if not settings.SEARXNG_URL:
        raise SearchError("The searxng provider is chosen but SEARXNG_URL is not set.")
    payload = _json_response(
        "SearXNG",
        lambda client: client.get(settings.SEARXNG_URL.rstrip("/") + "/search", params={"q": query, "format": "json"}),
    )
    return _hits("SearXNG", payload, limit=limit)


def _tavily(*, query: str, limit: int) -> list[SearchHit]:
    if not settings.TAVILY_API_KEY:
        raise SearchError("The tavily provider is chosen but TAVILY_API_KEY is not set.")
    payload = _json_response(
        "Tavily",
        lambda client: client.post(
            settings.TAVILY_URL.rstrip("/") + "/search",
            json={"api_key": settings.TAVILY_API_KEY, "query": query, "max_results": limit},
        ),
    )
    return _hits("Tavily", payload, limit=limit)


def _json_response(name: str, send) -> dict:
    """The provider's JSON answer, or SearchError saying what went wrong in
    words the model can act on (retry later, or tell the user)."""
    try:
        with httpx.Client(timeout=settings.FETCH_TIMEOUT) as client:
            response = send(client)
            response.raise_for_status()
    except httpx.HTTPStatusError as error:
        raise SearchError(f"{name} answered HTTP {error.response.status_code}; the search failed.") from None
    except httpx.TimeoutException:
        raise SearchError(f"{name} did not answer within {settings.FETCH_TIMEOUT:g} seconds.") from None
    except httpx.HTTPError as error:
        raise SearchError(f"{name} could not be reached: {error}") from None
    try:
        payload = response.json()
    except ValueError:
        raise SearchError(f"{name} answered with something that is not JSON.") from None
    if not isinstance(payload, dict):
        raise SearchError(f"{name} answered JSON without a results list.")
    return payload


def _hits(name: str, payload: dict, *, limit: int) -> list[SearchHit]:
    results = payload.get("results")
    if not isinstance(results, list):
        raise SearchError(f"{name} answered JSON without a results list.")
    hits = [
        SearchHit(
            title=str(result.get("title") or result["url"]),
            url=str(result["url"]),
            # Both providers put the snippet in "content".
            snippet=str(result.get("content") or ""),
        )
        # A result without a URL is no source; skip it rather than fail the search.
        for result in results
        if isinstance(result, dict) and result.get("url")
    ]
    return hits[:limit]


WEB_SEARCH_TOOL = Tool(
    name=WEB_SEARCH,
    description=(
        "Search for sources. Returns titles, URLs and snippets; read a result in full with web_fetch "
        "(library:// URLs are documents in the team library)."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to search for, in a few words."}},
        "required": ["query"],
    },
    handler=web_search,
    permission=AUTO,
)
