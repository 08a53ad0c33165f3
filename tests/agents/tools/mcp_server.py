"""A real MCP server for the tests, written with the `mcp` SDK's FastMCP:

    python -m tests.agents.tools.mcp_server stdio
    python -m tests.agents.tools.mcp_server http <port>

Over HTTP it refuses (401) any request whose X-Api-Key header is not
MCP_TEST_KEY from its environment, when that is set: a test sees the secret
header reach it. Its tools: a text, an image, the token it was given, an error, a hang."""

import asyncio
import base64
import os
import sys

from mcp.server.fastmcp import FastMCP, Image

# A 1×1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwAEAgH/hX6aAwAAAABJRU5ErkJggg=="
)

server = FastMCP("test-server", log_level="WARNING")


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Says the text back."""
    return " ".join([f"echo: {text}"] * times)


@server.tool(name="draw.picture")
def picture() -> Image:
    """Draws a tiny picture."""
    return Image(data=PNG, format="png")


@server.tool()
def token(spelt: str = "plain") -> str:
    """Tells the token it was passed in MCP_TEST_TOKEN (over stdio), spelt
    plain, JSON-escaped (every other character than a letter or digit as
    \\uXXXX) or as base64 of Basic credentials (svc:<token>)."""
    value = os.environ.get("MCP_TEST_TOKEN", "none")
    if spelt == "json":
        value = "".join(c if c.isalnum() else f"\\u{ord(c):04x}" for c in value)
    elif spelt == "basic":
        value = base64.b64encode(f"svc:{value}".encode()).decode()
    return f"my token is {value}"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the tool broke on purpose")


@server.tool()
async def hang() -> str:
    """Never answers."""
    await asyncio.sleep(3600)
    return "too late"


def _http(port: int) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse

    app = server.streamable_http_app()
    key = os.environ.get("MCP_TEST_KEY", "")

    async def checked(scope, receive, send):
        if scope["type"] == "http" and key:
            headers = dict(scope["headers"])
            if headers.get(b"x-api-key", b"").decode() != key:
                await PlainTextResponse("no key", status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    uvicorn.run(checked, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "http":
        _http(int(sys.argv[2]))
    else:
        server.run("stdio")
