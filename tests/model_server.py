"""A scripted OpenAI-compatible model server for tests.

It listens on a real socket and streams Server-Sent Events in the shape of the
Chat Completions API, so the `openai` SDK runs its real HTTP code path. Each
request takes the next reply from the script; an empty script answers 500 so a
test that asks more than it scripted fails loudly. A retry the SDK makes of a
request already answered (on a busy machine the client may give up on a slow
answer) gets that answer again, so it does not take the reply meant for the next
request; a retry after a scripted failure takes the next reply, as it should.
"""

import itertools
import json
import socket
import sys
import threading
import time
import unicodedata
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests import waits

# The longest a held stream waits for the test's release before it goes on by itself.
HOLD_TIMEOUT = waits.seconds(60)


@dataclass
class Text:
    """A streamed answer, cut into chunks of `chunk_size` characters."""

    content: str
    chunk_size: int = 8
    delay: float = 0.0  # seconds between chunks
    wait: float = 0.0  # seconds of silence before the first chunk, as a model thinking
    # Thinking streamed before the answer, in chunks as the answer is, under
    # `reasoning_field`: DeepSeek and vLLM say reasoning_content, Ollama and OpenRouter reasoning.
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"
    # Reported as completion_tokens_details.reasoning_tokens, as OpenAI's o-series does; None: no details.
    reasoning_tokens: int | None = None
    usage: bool = True  # send a usage chunk when the client asks for one
    # The prompt tokens the usage chunk reports, in place of the server's count,
    # as a service whose tokenizer counts otherwise than the estimate would.
    prompt_tokens: int | None = None
    # The usage chunk's figures as sent, in place of the server's count: a
    # service's or proxy's own shapes (strings, negatives) included.
    usage_sent: dict | None = None
    # Azure's shape: a first chunk with no choices (its prompt filter results)
    # and a content-filter verdict with an empty delta after every piece.
    filter_chunks: bool = False
    # Between every piece, chunks of shapes no service should send (ODD_CHUNKS):
    # a broken proxy's or a server extension's, which carry nothing.
    odd_chunks: bool = False
    # The stream stops before this text of the answer until the test calls
    # ScriptedModelServer.release(): a turn held mid-answer for as long as the
    # test needs, however busy the machine, in place of a stream slowed to last.
    hold: str | None = None


@dataclass
class Status:
    """An HTTP error answer (no stream): by default shaped like OpenAI's,
    `{"error": {"message", "type", "code"}}`, with the HTTP status for a code."""

    code: int
    message: str = "scripted failure"
    error_code: str | int | None = None
    error_type: str | None = "scripted"
    # The whole body in place of OpenAI's shape, as another service sends it:
    # a dict is sent as JSON, a string as it is (a proxy's HTML page).
    body: dict | str | None = None


@dataclass
class Drop:
    """Streams `content` and then cuts the connection without ending the stream."""

    content: str
    chunk_size: int = 8


@dataclass
class Truncated:
    """Streams `content` and then ends the stream cleanly, but early: no
    finish reason and no `data: [DONE]`, as a proxy that closes a stream
    mid-answer does. Unlike Drop, the HTTP body itself ends well."""

    content: str
    chunk_size: int = 8


@dataclass
class ToolCalls:
    """Native function calls, streamed the way the API does: the id and name
    first, the JSON arguments in pieces. `calls` holds (name, arguments) pairs;
    arguments is a dict, or a string sent as it is (to script malformed JSON)."""

    calls: list
    content: str = ""
    chunk_size: int = 8
    delay: float = 0.0  # seconds between chunks
    reasoning: str = ""  # thinking before the calls, under reasoning_content
    # The calls' pieces in turns, index by index, as a service sends parallel calls.
    interleaved: bool = False
    # Ends the stream with finish_reason "length" once this many characters of
    # arguments went out, as a model that reached its max_tokens mid-call. None: whole.
    length_cut: int | None = None


@dataclass
class StreamError:
    """Streams `content` (after `reasoning`), then an error event in the
    stream, `data: {"error": {...}}`, as vLLM, LiteLLM and OpenRouter report
    a failure after the answer began, and ends the stream."""

    content: str
    message: str = "upstream provider error"
    chunk_size: int = 8
    delay: float = 0.0
    reasoning: str = ""


@dataclass
class ScriptedModelServer:
    model: str = "scripted-model"
    script: deque = field(default_factory=deque)
    requests: list = field(default_factory=list)
    # (time.monotonic(), piece) for every piece of streamed text, as it is sent.
    sent: list = field(default_factory=list)
    # Tokens a request may hold, counted as the server does (prompt_tokens); a
    # longer one is refused with 400, as a real service refuses it. None: no limit.
    context_window: int | None = None

    _answered: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _released: threading.Event = field(default_factory=threading.Event)

    def add(self, *replies) -> None:
        self.script.extend(replies)

    def reset(self) -> None:
        """An empty script and logs, as a new server has."""
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self.sent.clear()
            self._answered.clear()
            # A stream still held by the test before goes on, and ends.
            self._released.set()
            self._released = threading.Event()

    def release(self) -> None:
        """Lets the held streams (Text.hold) go on."""
        self._released.set()

    def start(self) -> "ScriptedModelServer":
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # shutdown() waits for the loop's next poll: at the default 0.5 s, a quarter of a
        # second on average at the end of every test that used a server.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reply_for(self, body: dict, *, retry: bool):
        """The reply to a request: the next in the script, or the one a retried request already had."""
        key = json.dumps(body, sort_keys=True)
        with self._lock:
            if retry and key in self._answered:
                return self._answered[key]
            try:
                reply = self.script.popleft()
            except IndexError:
                return Status(500, "the scripted model server has no reply left for this request")
            if isinstance(reply, (Text, ToolCalls)):
                self._answered[key] = reply
            return reply


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that goes away mid-stream (a killed worker, a cancelled
        # turn) is what fault tests provoke, not an error of the server.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(server: ScriptedModelServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            server.requests.append(body)
            prompt = prompt_tokens(body)
            if server.context_window is not None and prompt > server.context_window:
                # The request is refused before any reply is taken from the script.
                self._send_error(
                    Status(
                        400,
                        f"This model's maximum context length is {server.context_window} tokens. "
                        f"However, your messages resulted in {prompt} tokens.",
                        error_code="context_length_exceeded",
                        error_type="invalid_request_error",
                    )
                )
                return
            # The openai SDK numbers its retries of a request in this header.
            retry = int(self.headers.get("X-Stainless-Retry-Count") or 0) > 0
            reply = server.reply_for(body, retry=retry)
            if isinstance(reply, Status):
                self._send_error(reply)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            include_usage = (body.get("stream_options") or {}).get("include_usage", False)
            if isinstance(reply, Drop):
                for piece in _pieces(reply.content, reply.chunk_size):
                    self._event(_chunk(server.model, {"content": piece}))
                # Without the closing zero-length chunk the client sees a broken stream.
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if isinstance(reply, Truncated):
                for piece in _pieces(reply.content, reply.chunk_size):
                    self._event(_chunk(server.model, {"content": piece}))
                # The closing zero-length chunk: the body ends well, the answer does not.
                self._write(b"")
                return
            if getattr(reply, "filter_chunks", False):
                self._event({**_chunk(server.model, None), "prompt_filter_results": [_FILTERED]})
            self._event(_chunk(server.model, {"role": "assistant", "content": ""}))
            if isinstance(reply, StreamError):
                self._streamed(reply, include_filter=False)
                self._event({"error": {"message": reply.message, "type": "server_error", "code": 502}})
                self._write(b"data: [DONE]\n\n")
                self._write(b"")
                return
            if isinstance(reply, ToolCalls):
                self._tool_calls(reply)
                self._write(b"data: [DONE]\n\n")
                self._write(b"")
                return
            time.sleep(reply.wait)
            self._streamed(reply, include_filter=reply.filter_chunks)
            self._event(_chunk(server.model, {}, finish_reason="stop"))
            if include_usage and reply.usage:
                prompt = prompt if reply.prompt_tokens is None else reply.prompt_tokens
                completion = max(1, _tokens(reply.content) + _tokens(reply.reasoning))
                usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
                if reply.reasoning_tokens is not None:
                    usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
                if reply.usage_sent is not None:
                    usage = reply.usage_sent
                self._event({**_chunk(server.model, None), "choices": [], "usage": usage})
            self._write(b"data: [DONE]\n\n")
            self._write(b"")

        def _streamed(self, reply, *, include_filter: bool):
            """The reply's thinking, then its text, piece by piece."""
            reasoning_field = getattr(reply, "reasoning_field", "reasoning_content")
            for piece in _pieces(reply.reasoning, reply.chunk_size):
                if reply.delay:
                    time.sleep(reply.delay)
                self._event(_chunk(server.model, {"content": None, reasoning_field: piece}))
            released = server._released
            hold = getattr(reply, "hold", None)
            parts = reply.content.split(hold, 1) if hold else [reply.content]
            for number, part in enumerate(parts):
                if number:
                    released.wait(timeout=HOLD_TIMEOUT)
                    part = hold + part
                for piece in _pieces(part, reply.chunk_size):
                    if reply.delay:
                        time.sleep(reply.delay)
                    self._event(_chunk(server.model, {"content": piece}))
                    server.sent.append((time.monotonic(), piece))
                    for odd in ODD_CHUNKS if getattr(reply, "odd_chunks", False) else ():
                        self._event(odd)
                    if include_filter:
                        verdict = _chunk(server.model, {})
                        verdict["choices"][0]["content_filter_results"] = _FILTERED["content_filter_results"]
                        self._event(verdict)

        def _tool_calls(self, reply: ToolCalls):
            self._streamed(reply, include_filter=False)
            # Each call's events: its head (id and name), then its arguments in pieces.
            streams = []
            for index, (name, arguments) in enumerate(reply.calls):
                text = arguments if isinstance(arguments, str) else json.dumps(arguments)
                head = {
                    "index": index,
                    "id": f"call_{index}_{name}",
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                streams.append(
                    [(index, head, "")] + [(index, None, piece) for piece in _pieces(text, reply.chunk_size)]
                )
            if reply.interleaved:
                order = [event for turn in itertools.zip_longest(*streams) for event in turn if event]
            else:
                order = [event for stream in streams for event in stream]
            sent = 0
            for index, head, piece in order:
                if reply.length_cut is not None and sent >= reply.length_cut:
                    self._event(_chunk(server.model, {}, finish_reason="length"))
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                part = head or {"index": index, "function": {"arguments": piece}}
                self._event(_chunk(server.model, {"tool_calls": [part]}))
                sent += len(piece)
            self._event(_chunk(server.model, {}, finish_reason="tool_calls"))

        def _send_error(self, reply: Status):
            if isinstance(reply.body, str):
                payload, content_type = reply.body.encode(), "text/html"
            else:
                error = {"message": reply.message, "type": reply.error_type, "code": reply.error_code or reply.code}
                payload, content_type = json.dumps(reply.body or {"error": error}).encode(), "application/json"
            self.send_response(reply.code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            # Keeps the SDK's retry backoff short in tests.
            self.send_header("retry-after-ms", "10")
            self.end_headers()
            self.wfile.write(payload)

        def _event(self, data: dict):
            self._write(b"data: " + json.dumps(data).encode() + b"\n\n")

        def _write(self, data: bytes):
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


# What Azure says of text its content filters passed.
_FILTERED = {
    "prompt_index": 0,
    "content_filter_results": {
        kind: {"filtered": False, "severity": "safe"} for kind in ("hate", "self_harm", "sexual", "violence")
    },
}


def prompt_tokens(body: dict) -> int:
    """The tokens of a request as this server counts them: the messages, their
    tool calls and the tools' schemas, a few tokens around each message."""
    tokens = _tokens(json.dumps(body.get("tools", []), ensure_ascii=False)) if body.get("tools") else 0
    for message in body.get("messages", []):
        tokens += 4 + _tokens(message.get("content") or "")
        if message.get("tool_calls"):
            tokens += _tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return tokens


def _tokens(text: str) -> int:
    """A stand-in for a real tokenizer, kept apart from the one the code
    estimates with: a token for each wide (East Asian) character, as real
    tokenizers spend about one on a Han character, kana or Hangul syllable,
    and one for every four other characters."""
    if text.isascii():
        return -(-len(text) // 4)
    wide = sum(1 for char in text if char >= "\u1100" and unicodedata.east_asian_width(char) in "WF")
    return wide + -(-(len(text) - wide) // 4)


def _pieces(text: str, size: int):
    return [text[i : i + size] for i in range(0, len(text), size)]


ODD_CHUNKS = (
    [],
    "keep-alive",
    {"choices": "none"},
    {"choices": [5, {"delta": "text"}, {"delta": {"content": 7, "tool_calls": "x"}}, {"finish_reason": 1}]},
    {"choices": [{"delta": {"tool_calls": [3, {"index": "a", "function": "f"}]}}]},
    {"choices": [], "usage": 3},
)


def _chunk(model: str, delta: dict | None, finish_reason=None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
