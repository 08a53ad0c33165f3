"""What the engine and compaction ask of a model, and what a model streams
back: the `ChatModel` protocol, its `Delta`s and the `ModelError` it raises."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ..tools.base import Tool

# How the model calls tools: written in its text (seed 003), or the API's function calling.
NATIVE, XML = "native", "xml"
TOOL_MODES = (NATIVE, XML)

TITLE_MAX_CHARS = 60
# The one request a model gets besides the agents' steps (agents.titling): here,
# so that the demo model knows it.
TITLE_PROMPT = (
    "You name conversations. Reply with a title for the conversation below: at most "
    f"{TITLE_MAX_CHARS} characters, in the language of the question, naming its subject. "
    "Reply with the title alone: no quotes, no trailing period, no explanation."
)


class ModelError(Exception):
    """The model could not be reached or broke off; the message is shown to the user."""


class ContextOverflow(ModelError):
    """The model service refused the request for its length: the engine
    compacts the context and asks once more before the turn fails."""


@dataclass
class Delta:
    content: str = ""
    reasoning: str = ""
    usage: dict | None = None
    # Native function calls, complete, sent once after the stream: id, name, arguments (JSON text).
    tool_calls: list[dict] = field(default_factory=list)
    # The stream broke and is being asked again: what was received so far is void.
    restart: str = ""


class ChatModel(Protocol):
    name: str
    # The offline demo model: the page says its answers are not a real model's.
    demo: bool
    tool_mode: str
    # Estimated tokens the model accepts; compaction starts well before it.
    context_window: int

    def stream(self, messages: list[dict], *, tools: Iterable[Tool] = ()) -> Iterator[Delta]:
        """The answer to `messages` as it arrives; raises ModelError when it cannot be had."""
