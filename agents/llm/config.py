"""Which model each agent talks to: the OpenAI SDK against any
OpenAI-compatible server, or the offline demo model when no API key is
configured.

Models for single agents come from an optional TOML file
(ARTIFACTFLOW_MODELS_FILE); without one every agent uses the model the
OPENAI_* / ARTIFACTFLOW_MODEL environment describes. Keys never live in the
file: a model names the environment variable that holds its key. The file may
also list the models people choose the lead's from, per conversation, in the
composer ([lead] choices).
"""

import logging
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ..config import LEAD_AGENT
from .base import TOOL_MODES, XML, ChatModel
from .demo import DemoChatModel
from .openai_model import ModelSettings, OpenAIChatModel

logger = logging.getLogger(__name__)


class AgentModels:
    """Which model each agent talks to; `lead_label` names the lead's for people
    (its models-file label), empty when the environment's model leads."""

    def __init__(self, *, default: ChatModel, by_agent: dict[str, ChatModel] | None = None, lead_label: str = ""):
        self.default = default
        self.by_agent = by_agent or {}
        self.lead_label = lead_label

    def for_agent(self, agent: str) -> ChatModel:
        return self.by_agent.get(agent, self.default)


@dataclass(frozen=True)
class ModelEntry:
    """A model of the models file: what it is called there, what people see of
    it, and how to reach it."""

    name: str
    settings: ModelSettings
    label: str
    # Informational: the picker says it thinks before answering.
    thinking: bool = False


@dataclass(frozen=True)
class Price:
    """What a model's service charges per million tokens, in the file's currency."""

    input: float
    output: float
    # Prompt tokens the service read from its cache; at the input price when the file gives none.
    cached: float


@dataclass(frozen=True)
class ModelsFile:
    models: dict[str, ModelEntry]
    # agent → model name
    agents: dict[str, str]
    # The models people may choose for the lead, in the file's order.
    lead_choices: tuple[str, ...] = ()
    # By the model's name at its service, as usage records it (agents.usage).
    prices: dict[str, Price] = field(default_factory=dict)
    currency: str = ""

    @property
    def lead_default(self) -> str:
        """The lead's model when nobody chose one: [agents] lead_agent, else the first choice."""
        return self.agents.get(LEAD_AGENT) or (self.lead_choices[0] if self.lead_choices else "")


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


def models_file_read(path: Path, *, default: ModelSettings, environ: dict) -> ModelsFile:
    """The file's models by name, its agent → model-name table and the
    models people may choose for the lead.

    [models.local]
    label = "Local Qwen"              # what people see; the name (local) without it
    base_url = "http://127.0.0.1:11434/v1"
    model = "qwen2.5:14b"
    api_key_env = "LOCAL_MODEL_KEY"   # the key itself stays in the environment
    context_window = 32768
    tool_mode = "xml"                 # or "native"
    thinking = false                  # the picker says a thinking model thinks first

    [agents]
    search_agent = "local"

    [lead]
    choices = ["local", "deep"]       # the composer offers these for the lead

    currency = "USD"                  # the usage page's estimated costs are in it
    [prices."qwen2.5:14b"]            # by the model's name at its service
    input = 0.30                      # per million tokens
    output = 1.20
    cached = 0.03                     # cached prompt tokens; the input price without it
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
        label = entry.pop("label", name)
        thinking = entry.pop("thinking", False)
        unknown = set(entry) - known
        if unknown:
            raise ImproperlyConfigured(f"Model {name!r} in {path} has unknown settings: {', '.join(sorted(unknown))}.")
        if entry.get("tool_mode", XML) not in TOOL_MODES:
            raise ImproperlyConfigured(f"Model {name!r}: tool_mode must be one of {', '.join(TOOL_MODES)}.")
        if not isinstance(label, str) or not label.strip():
            raise ImproperlyConfigured(f"Model {name!r}: label must be a text that is not empty.")
        if not isinstance(thinking, bool):
            raise ImproperlyConfigured(f"Model {name!r}: thinking must be true or false.")
        config = replace(default, **entry)
        if key_env is not None:
            if not environ.get(key_env):
                raise ImproperlyConfigured(f"Model {name!r} needs its key in the environment variable {key_env}.")
            config = replace(config, api_key=environ[key_env])
        models[name] = ModelEntry(name=name, settings=config, label=label.strip(), thinking=thinking)
    agents = data.get("agents", {})
    for agent, name in agents.items():
        if name not in models:
            raise ImproperlyConfigured(f"Agent {agent!r} uses model {name!r}, which {path} does not define.")
    currency = data.get("currency", "")
    if not isinstance(currency, str) or len(currency) > 10:
        raise ImproperlyConfigured(f"currency in {path} must be a short text, such as USD.")
    return ModelsFile(
        models=models,
        agents=agents,
        lead_choices=_lead_choices(data, path=path, models=models),
        prices=_prices(data, path=path),
        currency=currency.strip(),
    )


def _prices(data: dict, *, path: Path) -> dict[str, Price]:
    prices = {}
    for model, entry in data.get("prices", {}).items():
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"[prices.{model!r}] in {path} must be a table of input, output and cached.")
        if unknown := sorted(set(entry) - {"input", "output", "cached"}):
            raise ImproperlyConfigured(f"[prices.{model!r}] in {path} has unknown settings: {', '.join(unknown)}.")
        figures = {}
        for name in ("input", "output", "cached"):
            value = entry.get(name, entry.get("input", 0) if name == "cached" else 0)
            if type(value) not in (int, float) or not 0 <= value < 1_000_000:
                raise ImproperlyConfigured(
                    f"[prices.{model!r}] {name} in {path} must be a price per million tokens, 0 or more."
                )
            figures[name] = float(value)
        prices[model] = Price(**figures)
    return prices


def _lead_choices(data: dict, *, path: Path, models: dict) -> tuple[str, ...]:
    lead = data.get("lead", {})
    if unknown := sorted(set(lead) - {"choices"}):
        raise ImproperlyConfigured(f"The [lead] table of {path} has unknown settings: {', '.join(unknown)}.")
    choices = lead.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(name, str) for name in choices):
        raise ImproperlyConfigured(f"[lead] choices in {path} must be a list of model names.")
    if undefined := [name for name in choices if name not in models]:
        raise ImproperlyConfigured(
            f"[lead] choices name models {path} does not define: {', '.join(undefined)}. "
            f"It defines {', '.join(models) or 'none'}."
        )
    if len(set(choices)) < len(choices):
        raise ImproperlyConfigured(f"[lead] choices in {path} name a model twice.")
    # The lead's configured model is what a person who chose nothing gets: the picker must offer it.
    lead_model = data.get("agents", {}).get(LEAD_AGENT)
    if choices and lead_model and lead_model not in choices:
        raise ImproperlyConfigured(
            f"[agents] gives the lead model {lead_model!r}, which is not among its [lead] choices in {path}."
        )
    return tuple(choices)


def models_file_from_settings() -> ModelsFile | None:
    """The models file, read afresh (an edit needs no restart); None without one."""
    if not settings.MODELS_FILE:
        return None
    return models_file_read(Path(settings.MODELS_FILE), default=model_settings_default(), environ=os.environ)


def prices_from_settings() -> tuple[dict[str, Price], str]:
    """The models file's prices and currency; none without a file, or with a
    broken one (its turns fail and say why) rather than breaking the usage page."""
    try:
        file = models_file_from_settings()
    except ImproperlyConfigured as exc:
        logger.warning("No prices are known: %s", exc)
        return {}, ""
    return (file.prices, file.currency) if file else ({}, "")


def models_from_settings(*, lead: str = "") -> AgentModels:
    """The models of a turn. `lead` is the model a person chose for the lead
    agent: one of the file's [lead] choices, else (blank, or removed from the
    file since) the lead keeps its configured model."""
    default = model_settings_default()
    if not default.api_key:
        return AgentModels(default=DemoChatModel(word_delay=settings.DEMO_WORD_DELAY))
    file = models_file_from_settings()
    if file is None:
        return AgentModels(default=OpenAIChatModel(default))
    if lead and lead not in file.lead_choices:
        logger.info("The lead model %r chosen is not among the file's choices (any more); the default leads", lead)
    agents = dict(file.agents)
    if chosen := lead if lead in file.lead_choices else file.lead_default:
        agents[LEAD_AGENT] = chosen
    by_agent = {agent: OpenAIChatModel(file.models[name].settings) for agent, name in agents.items()}
    lead_name = agents.get(LEAD_AGENT, "")
    return AgentModels(
        default=OpenAIChatModel(default),
        by_agent=by_agent,
        lead_label=file.models[lead_name].label if lead_name else "",
    )


def lead_choices_from_settings() -> tuple[list[ModelEntry], str]:
    """The models a person may choose for the lead and the one they get when
    they choose none. Nothing to choose with the demo model (no API key) or
    without [lead] choices; a broken file offers nothing either (its turns
    fail and say why), rather than breaking every page."""
    if not settings.ARTIFACTFLOW_LLM.get("api_key"):
        return [], ""
    try:
        file = models_file_from_settings()
    except ImproperlyConfigured as exc:
        logger.warning("No lead models are offered: %s", exc)
        return [], ""
    if file is None:
        return [], ""
    return [file.models[name] for name in file.lead_choices], file.lead_default
