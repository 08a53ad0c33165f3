"""Which model each agent talks to: the OpenAI SDK against any
OpenAI-compatible server, or the offline demo model when no API key is
configured.

Models for single agents come from an optional TOML file
(ARTIFACTFLOW_MODELS_FILE); without one every agent uses the model the
OPENAI_* / ARTIFACTFLOW_MODEL environment describes. Keys never live in the
file: a model names the environment variable that holds its key.
"""

import os
import tomllib
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .base import TOOL_MODES, XML, ChatModel
from .demo import DemoChatModel
from .openai_model import ModelSettings, OpenAIChatModel


class AgentModels:
    """Which model each agent talks to."""

    def __init__(self, *, default: ChatModel, by_agent: dict[str, ChatModel] | None = None):
        self.default = default
        self.by_agent = by_agent or {}

    def for_agent(self, agent: str) -> ChatModel:
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
        return AgentModels(default=DemoChatModel(word_delay=settings.DEMO_WORD_DELAY))
    by_agent = {}
    if settings.MODELS_FILE:
        models, agents = models_file_read(Path(settings.MODELS_FILE), default=default, environ=os.environ)
        by_agent = {agent: OpenAIChatModel(models[name]) for agent, name in agents.items()}
    return AgentModels(default=OpenAIChatModel(default), by_agent=by_agent)
