"""The OpenAI SDK against any OpenAI-compatible server: the request, the
stream's fragments put together into `Delta`s, and a stream that breaks off
mid-answer asked again."""

import functools
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import openai
from django.utils.translation import gettext_noop

from ..tools.base import Tool
from .base import NATIVE, XML, ContextOverflow, Delta, ModelError
from .hermes import HermesCalls
from .think import ThinkSplitter

logger = logging.getLogger(__name__)

# How long a stream may be silent before its reader hands the caller an empty Delta (_paced).
IDLE_TICK_SECONDS = 0.25


@dataclass(frozen=True)
class ModelSettings:
    """One OpenAI-compatible model, as the environment or the models file describes it (config)."""

    model: str
    api_key: str = ""
    base_url: str | None = None
    context_window: int = 128_000
    temperature: float | None = None
    tool_mode: str = XML
    timeout: float = 120.0
    max_retries: int = 2


@functools.lru_cache(maxsize=32)
def _client(config: ModelSettings) -> openai.OpenAI:
    """One client per model per process, shared by its turns' threads (its
    HTTP client is thread-safe): building one loads the system's
    certificates, 20 ms of CPU, twice a turn and more with agents on other
    models."""
    # The SDK retries 408/409/429/5xx and connection errors with backoff
    # before a stream starts; a stream that breaks off is retried here.
    return openai.OpenAI(
        api_key=config.api_key, base_url=config.base_url, timeout=config.timeout, max_retries=config.max_retries
    )


# A forked process opens connections of its own rather than share its parent's.
os.register_at_fork(after_in_child=_client.cache_clear)


class OpenAIChatModel:
    demo = False

    def __init__(self, config: ModelSettings):
        self.config = config
        self.name = config.model
        self.tool_mode = config.tool_mode
        self.context_window = config.context_window
        self._client = _client(config)

    def stream(self, messages: list[dict], *, tools: Iterable[Tool] = ()) -> Iterator[Delta]:
        request = {"model": self.name, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
        if self.config.temperature is not None:
            request["temperature"] = self.config.temperature
        tools = list(tools)
        if tools and self.tool_mode == NATIVE:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        return _paced(lambda live: self._attempts(request, live))

    def _attempts(self, request: dict, live: "_Live") -> Iterator[Delta]:
        attempt = 0
        while True:
            try:
                yield from self._stream_once(request, live)
                return
            except _BrokenStream as broken:
                if live.abandoned:
                    return
                error = broken.error
            attempt += 1
            if attempt > self.config.max_retries:
                raise ModelError(
                    f"The connection to the model service failed: {_brief(error, api_key=self.config.api_key)}"
                )
            logger.warning(
                "Model stream broke off (%s); asking again, attempt %d",
                _brief(error, api_key=self.config.api_key),
                attempt + 1,
            )
            yield Delta(restart=_brief(error, api_key=self.config.api_key))
            time.sleep(min(0.5 * 2 ** (attempt - 1), 8))
            if live.abandoned:
                return

    def _stream_once(self, request: dict, live: "_Live") -> Iterator[Delta]:
        received = False
        reasons: set[str] = set()
        calls: dict[int, dict] = {}
        # Each attempt starts a new answer: a restart leaves no half-read tag behind.
        splitter = ThinkSplitter()
        # Offered tools, a model whose server has no tool parser writes its calls in the text.
        written = HermesCalls() if "tools" in request else None
        try:
            # The SDK's request, retries, event decoding and errors, but each
            # chunk left as the JSON object it came as: building its typed
            # model was a third of a worker's CPU while fifty answers streamed.
            stream = self._client.post(
                "/chat/completions", body=request, cast_to=object, stream=True, stream_cls=openai.Stream[object]
            )
            live.stream = stream
            with stream:
                for chunk in stream:
                    choices = _choices(chunk)
                    # "stop", "length", "tool_calls"…: any reason means the model ended the answer itself.
                    reasons.update(choice["finish_reason"] for choice in choices if _text(choice.get("finish_reason")))
                    for delta in _deltas(chunk, choices, calls):
                        received = True
                        if delta.content:
                            inline, delta.content = splitter.feed(delta.content)
                            delta.reasoning += inline
                        if delta.content and written is not None:
                            delta.content = written.feed(delta.content)
                        if delta.content or delta.reasoning or delta.usage:
                            yield delta
        except openai.APIStatusError as exc:
            if _refused_for_length(exc):
                raise ContextOverflow(
                    "The model service refused the request as longer than the model's context: "
                    f"{_brief(exc.message, api_key=self.config.api_key)}"
                ) from exc
            raise ModelError(
                f"The model service answered {exc.status_code}: {_brief(exc.message, api_key=self.config.api_key)}"
            ) from exc
        except openai.APITimeoutError as exc:
            if not received:
                raise ModelError(gettext_noop("The model service did not answer in time.")) from exc
            raise _BrokenStream("timed out mid-answer") from exc
        except openai.APIError as exc:
            if type(exc) is openai.APIError and exc.body is not None:
                # An error event in the stream (vLLM, LiteLLM, OpenRouter): the
                # service itself says the answer failed, in its words; asking
                # again would pay for a whole new answer the person did not ask for.
                raise ModelError(
                    "The model service reported an error in the middle of its answer: "
                    f"{_brief(exc.message, api_key=self.config.api_key)}"
                ) from exc
            # Before the stream started the SDK has already retried; after, we do.
            if not received:
                raise ModelError(
                    f"The connection to the model service failed: {_brief(exc.message, api_key=self.config.api_key)}"
                ) from exc
            raise _BrokenStream(exc.message) from exc
        if not reasons:
            # The SDK stops quietly when the response body ends, with or without
            # `data: [DONE]`: a proxy or server that closes the stream cleanly
            # mid-answer would pass the partial text (or half-sent tool calls)
            # off as the whole answer. Without a finish reason it is a broken
            # stream, asked again like one that was cut.
            raise _BrokenStream("the stream ended before the answer was finished")
        reasoning, content = splitter.finish()
        written_calls = []
        if written is not None:
            content = written.feed(content)
            rest, written_calls = written.finish()
            content += rest
        if reasoning or content:
            yield Delta(content=content, reasoning=reasoning)
        native = [calls[i] for i in sorted(calls)]
        if (native or written_calls) and "length" in reasons:
            # Cut at the output limit, a call's arguments are a fragment: run,
            # the call would do something else than the model meant.
            raise ModelError(
                gettext_noop(
                    "The model reached its output limit in the middle of a tool call, so the call was cut off and "
                    "not run. Raise the model's output limit (max_tokens) at the model service, or ask for less at once."
                )
            )
        if native or written_calls:
            yield Delta(tool_calls=native or written_calls)


# Every service refuses a request longer than its model's context as a plain
# 400 (the SDK has no error of its own for it), each in its own words. Told
# apart from other bad requests, it is one the engine can mend: compact the
# context and ask again (agents.engine). A tool schema the service rejects, a
# content policy, a wrong key or a rate limit would be refused again, so
# anything else stays a ModelError.
_OVERFLOW_CODE = "context_length_exceeded"  # OpenAI, and services that copy its errors
_OVERFLOW_WORDS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"maximum context length is \d+",  # OpenAI, vLLM
        r"exceeds the context window",  # OpenAI
        r"longer than the maximum model length|max_model_len",  # vLLM
        r"exceeds? the available context size|exceed_context_size_error",  # llama.cpp server
        r"input length exceeds the context length|context length exceeded",  # Ollama
        r"prompt is too long|input length and `?max_tokens`? exceed context limit",  # Anthropic, llama.cpp
        r"ContextWindowExceededError",  # LiteLLM proxy, whatever the upstream said
    )
)


def _refused_for_length(exc: openai.APIStatusError) -> bool:
    """Whether the service refused the request for its length: a 413 (a
    proxy's body limit), or a 400 whose code, type or words say so."""
    if exc.status_code == 413:
        return True
    if exc.status_code != 400:
        return False
    if exc.code == _OVERFLOW_CODE:
        return True
    # The SDK's message holds the error's own message only when the body is
    # JSON shaped like OpenAI's; Ollama's native errors are a bare string.
    said = [exc.message, exc.type or "", exc.body if isinstance(exc.body, str) else ""]
    return any(pattern.search(text) for pattern in _OVERFLOW_WORDS for text in said)


class _Live:
    """The HTTP stream a reader thread is on, and whether its caller has gone."""

    def __init__(self):
        self.stream = None
        self.abandoned = False

    def abandon(self) -> None:
        self.abandoned = True
        if self.stream is not None:
            # Ends the reader's wait on the socket rather than leaving it until the service speaks or times out.
            try:
                self.stream.close()
            except Exception:  # the reader may be closing it too; it is going away either way
                logger.debug("Closing an abandoned model stream failed", exc_info=True)


_END = object()


def _paced(produce: Callable[[_Live], Iterator[Delta]]) -> Iterator[Delta]:
    """What `produce` yields, read in a thread of its own, with an empty
    Delta whenever nothing came for IDLE_TICK_SECONDS. A thinking model can be
    silent for a minute before its first token, and the SDK's retries wait
    too: the caller gets control all the while, to stop a turn within a
    second. Closing this generator abandons the thread and its stream."""
    arrived: queue.SimpleQueue = queue.SimpleQueue()
    live = _Live()

    def read():
        try:
            for delta in produce(live):
                if live.abandoned:
                    return
                arrived.put(delta)
        except BaseException as exc:  # handed to the caller, who raises it
            arrived.put(exc)
        else:
            arrived.put(_END)

    threading.Thread(target=read, name="model-stream", daemon=True).start()
    try:
        while True:
            try:
                item = arrived.get(timeout=IDLE_TICK_SECONDS)
            except queue.Empty:
                yield Delta()
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        live.abandon()


class _BrokenStream(Exception):
    def __init__(self, error: str):
        self.error = str(error)


def _choices(chunk: object) -> list[dict]:
    """A chunk's choices that are objects; a chunk or choice of any other
    shape (a proxy's keep-alive, a server's own extension) carries nothing."""
    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
        return []
    return [choice for choice in chunk["choices"] if isinstance(choice, dict)]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _counts(usage: object) -> dict | None:
    """A usage report whose prompt and completion counts are whole numbers,
    with its total and details' figures that are (the total made up where it
    is not); any other report is none at all, and the call is estimated as
    one the service reported nothing for (agents.budgets)."""
    if not isinstance(usage, dict) or not all(type(usage.get(key)) is int for key in _REQUIRED_COUNTS):
        return None
    counts = {key: value for key, value in usage.items() if type(value) is int}
    counts.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    for key, details in usage.items():
        if isinstance(details, dict):
            counts[key] = {name: value for name, value in details.items() if type(value) is int}
    return counts


_REQUIRED_COUNTS = ("prompt_tokens", "completion_tokens")


def _deltas(chunk: object, choices: list[dict], calls: dict[int, dict]) -> Iterator[Delta]:
    usage = _counts(chunk.get("usage")) if isinstance(chunk, dict) else None
    if usage:
        yield Delta(usage=usage)
    for choice in choices:
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            continue
        parts = delta.get("tool_calls")
        for part in parts if isinstance(parts, list) else []:
            # Function calls arrive in fragments keyed by index: the id and
            # name once, the JSON arguments piece by piece.
            if not isinstance(part, dict) or not isinstance(part.get("index"), int):
                continue
            call = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
            if _text(part.get("id")):
                call["id"] = part["id"]
            function = part.get("function")
            if isinstance(function, dict):
                call["name"] += _text(function.get("name"))
                call["arguments"] += _text(function.get("arguments"))
        # Reasoning models send their thinking beside the answer, under a name
        # that is not part of the OpenAI schema.
        reasoning = _text(delta.get("reasoning_content")) or _text(delta.get("reasoning"))
        content = _text(delta.get("content"))
        if content or reasoning:
            yield Delta(content=content, reasoning=reasoning)


# What a proxy or a model service may echo back in an error: credentials in
# headers, key=value pairs and URLs. Error texts reach the person who asked,
# the run's events and the logs.
_SECRETS = (
    re.compile(r"(?i)\b((?:proxy-)?authorization)([\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?[^\s\"',;}]+"),
    re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{4,}"),
    re.compile(
        r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|secret|password|passwd)([\"']?\s*[:=]\s*[\"']?)[^\s\"',;&}]+"
    ),
    re.compile(r"(?i)(://)([^/\s:@]*:)[^/\s@]+(?=@)"),
    re.compile(r"()()\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}"),
)


def _redacted(text: str, *, api_key: str) -> str:
    if len(api_key) >= 6:
        text = text.replace(api_key, "[redacted]")
    for pattern in _SECRETS:
        text = pattern.sub(r"\1\2[redacted]", text)
    return text


def _brief(text: str, *, api_key: str, limit: int = 300) -> str:
    text = _redacted(" ".join(str(text).split()), api_key=api_key)
    return text if len(text) <= limit else text[:limit] + "…"
