"""Model access: the OpenAI SDK against any OpenAI-compatible server, or the
offline demo model when no API key is configured.

Which model each agent talks to comes from an optional TOML file
(ARTIFACTFLOW_MODELS_FILE); without one every agent uses the model the
OPENAI_* / ARTIFACTFLOW_MODEL environment describes. Keys never live in the
file: a model names the environment variable that holds its key.
"""

import logging
import os
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

DEMO_MODEL = "demo"
NATIVE, XML = "native", "xml"
TOOL_MODES = (NATIVE, XML)


class ModelError(Exception):
    """The model could not be reached or broke off; the message is shown to the user."""


@dataclass
class Delta:
    content: str = ""
    reasoning: str = ""
    usage: dict | None = None
    # Native function calls, complete, sent once after the stream: id, name, arguments (JSON text).
    tool_calls: list[dict] = field(default_factory=list)
    # The stream broke and is being asked again: what was received so far is void.
    restart: str = ""


@dataclass(frozen=True)
class ModelSettings:
    model: str
    api_key: str = ""
    base_url: str | None = None
    context_window: int = 128_000
    temperature: float | None = None
    tool_mode: str = XML
    timeout: float = 120.0
    max_retries: int = 2


class OpenAIChatModel:
    demo = False

    def __init__(self, config: ModelSettings):
        self.config = config
        self.name = config.model
        self.tool_mode = config.tool_mode
        self.context_window = config.context_window
        # The SDK retries 408/409/429/5xx and connection errors with backoff
        # before a stream starts; a stream that breaks off is retried here.
        self._client = openai.OpenAI(
            api_key=config.api_key, base_url=config.base_url, timeout=config.timeout, max_retries=config.max_retries
        )

    def stream(self, messages: list[dict], *, tools: Iterable = ()) -> Iterator[Delta]:
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
        attempt = 0
        while True:
            try:
                yield from self._stream_once(request)
                return
            except _BrokenStream as broken:
                error = broken.error
            attempt += 1
            if attempt > self.config.max_retries:
                raise ModelError(f"The connection to the model service failed: {_brief(error)}")
            logger.warning("Model stream broke off (%s); asking again, attempt %d", error, attempt + 1)
            yield Delta(restart=_brief(error))
            time.sleep(min(0.5 * 2 ** (attempt - 1), 8))

    def _stream_once(self, request: dict) -> Iterator[Delta]:
        received = finished = False
        calls: dict[int, dict] = {}
        try:
            stream = self._client.chat.completions.create(**request)
            with stream:
                for chunk in stream:
                    # "stop", "length", "tool_calls"…: any reason means the model ended the answer itself.
                    finished = finished or any(choice.finish_reason for choice in chunk.choices or [])
                    for delta in _deltas(chunk, calls):
                        received = True
                        yield delta
        except openai.APIStatusError as exc:
            raise ModelError(f"The model service answered {exc.status_code}: {_brief(exc.message)}") from exc
        except openai.APITimeoutError as exc:
            if not received:
                raise ModelError("The model service did not answer in time.") from exc
            raise _BrokenStream("timed out mid-answer") from exc
        except openai.APIError as exc:
            # Before the stream started the SDK has already retried; after, we do.
            if not received:
                raise ModelError(f"The connection to the model service failed: {_brief(exc.message)}") from exc
            raise _BrokenStream(exc.message) from exc
        if not finished:
            # The SDK stops quietly when the response body ends, with or without
            # `data: [DONE]`: a proxy or server that closes the stream cleanly
            # mid-answer would pass the partial text (or half-sent tool calls)
            # off as the whole answer. Without a finish reason it is a broken
            # stream, asked again like one that was cut.
            raise _BrokenStream("the stream ended before the answer was finished")
        if calls:
            yield Delta(tool_calls=[calls[i] for i in sorted(calls)])


class _BrokenStream(Exception):
    def __init__(self, error: str):
        self.error = str(error)


def _deltas(chunk, calls: dict[int, dict]) -> Iterator[Delta]:
    usage = chunk.usage.model_dump() if getattr(chunk, "usage", None) else None
    if usage:
        yield Delta(usage=usage)
    for choice in chunk.choices or []:
        delta = choice.delta
        if delta is None:
            continue
        for part in delta.tool_calls or []:
            # Function calls arrive in fragments keyed by index: the id and
            # name once, the JSON arguments piece by piece.
            call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
            if part.id:
                call["id"] = part.id
            if part.function is not None:
                call["name"] += part.function.name or ""
                call["arguments"] += part.function.arguments or ""
        # Reasoning models send their thinking beside the answer, under a name
        # that is not part of the OpenAI schema.
        extra = delta.model_extra or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
        if delta.content or reasoning:
            yield Delta(content=delta.content or "", reasoning=reasoning)


def _brief(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


class AgentModels:
    """Which model each agent talks to."""

    def __init__(self, *, default, by_agent: dict | None = None):
        self.default = default
        self.by_agent = by_agent or {}

    def for_agent(self, agent: str):
        return self.by_agent.get(agent, self.default)


def model_settings_default() -> ModelSettings:
    config = settings.ARTIFACTFLOW_LLM
    if config.get("tool_mode", XML) not in TOOL_MODES:
        raise ImproperlyConfigured(f"ARTIFACTFLOW_TOOL_MODE must be one of {', '.join(TOOL_MODES)}.")
    return ModelSettings(
        model=config["model"],
        api_key=config["api_key"],
        base_url=config["base_url"],
        context_window=config.get("context_window", 128_000),
        temperature=config.get("temperature"),
        tool_mode=config.get("tool_mode", XML),
        timeout=config["timeout"],
        max_retries=config["max_retries"],
    )


def models_file_read(path: Path, *, default: ModelSettings, environ: dict) -> tuple[dict, dict]:
    """The file's models by name and its agent → model-name table.

    [models.local]
    base_url = "http://127.0.0.1:11434/v1"
    model = "qwen2.5:14b"
    api_key_env = "LOCAL_MODEL_KEY"   # the key itself stays in the environment
    context_window = 32768
    tool_mode = "xml"                 # or "native"

    [agents]
    search_agent = "local"
    """
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ImproperlyConfigured(f"Cannot read the models file {path}: {exc}") from exc
    known = {f for f in ModelSettings.__dataclass_fields__ if f != "api_key"}
    models = {}
    for name, entry in data.get("models", {}).items():
        entry = dict(entry)
        key_env = entry.pop("api_key_env", None)
        unknown = set(entry) - known
        if unknown:
            raise ImproperlyConfigured(f"Model {name!r} in {path} has unknown settings: {', '.join(sorted(unknown))}.")
        if entry.get("tool_mode", XML) not in TOOL_MODES:
            raise ImproperlyConfigured(f"Model {name!r}: tool_mode must be one of {', '.join(TOOL_MODES)}.")
        config = replace(default, **entry)
        if key_env is not None:
            if not environ.get(key_env):
                raise ImproperlyConfigured(f"Model {name!r} needs its key in the environment variable {key_env}.")
            config = replace(config, api_key=environ[key_env])
        models[name] = config
    agents = data.get("agents", {})
    for agent, name in agents.items():
        if name not in models:
            raise ImproperlyConfigured(f"Agent {agent!r} uses model {name!r}, which {path} does not define.")
    return models, agents


def models_from_settings() -> AgentModels:
    default = model_settings_default()
    if not default.api_key:
        from .demo import DemoChatModel  # it streams llm.Delta: imported here, not at the top

        return AgentModels(default=DemoChatModel(word_delay=settings.DEMO_WORD_DELAY))
    by_agent = {}
    if settings.MODELS_FILE:
        models, agents = models_file_read(Path(settings.MODELS_FILE), default=default, environ=os.environ)
        by_agent = {agent: OpenAIChatModel(models[name]) for agent, name in agents.items()}
    return AgentModels(default=OpenAIChatModel(default), by_agent=by_agent)
