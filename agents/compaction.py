"""Compaction (seed 004): when an agent's context grows past a share of its
model's window, the older part is summarised by the model into seven sections
and the agent continues from the summary. The task plan lives in the system
prompt, which is never summarised, so progress survives.

A compaction that fails is a ModelError: the turn stops with a visible reason
rather than continuing on a silently truncated context.
"""

from dataclasses import dataclass

from django.conf import settings

from .context import prompt_text
from .llm.base import ChatModel, ModelError
from .tokens import messages_tokens

# The newest tool call and its result stay verbatim: the agent is acting on them.
KEEP_INTERACTIONS = 2
SECTIONS = 7


@dataclass
class Compacted:
    summary: str
    kept: int  # how many of the newest interactions stay as they were


def context_tokens(*, estimate: int, reported: int = 0, reported_estimate: int = 0) -> int:
    """The tokens of a request estimated at `estimate`. When the model service
    counted the agent's last request (`reported`, for one estimated at
    `reported_estimate`), its count plus the estimate of what changed since:
    the service's own tokenizer, not the estimate, is what its window is
    measured in. Without a count, the estimate of the whole."""
    if not reported:
        return estimate
    return max(0, reported + estimate - reported_estimate)


def _limit(model: ChatModel) -> float:
    return settings.COMPACTION_THRESHOLD * model.context_window


def needed(*, tokens: int, model: ChatModel) -> bool:
    return tokens > _limit(model)


def keep_count(*, interactions: list[dict], model: ChatModel) -> int:
    """How many of the newest interactions stay verbatim: the last call and its
    result, unless they alone would fill half the room again."""
    if len(interactions) <= KEEP_INTERACTIONS:
        return 0
    newest = interactions[-KEEP_INTERACTIONS:]
    return KEEP_INTERACTIONS if messages_tokens(messages=newest) < _limit(model) / 2 else 0


def compact(*, model: ChatModel, messages: list[dict], keep: int) -> Compacted:
    """Summarise `messages` but the system prompt and the newest `keep` ones."""
    older = messages[1 : len(messages) - keep]
    if not older:
        raise ModelError("The context is too long for the model and there is nothing older to compact.")
    transcript = "\n\n".join(_render(message) for message in older)
    request = [
        {"role": "system", "content": prompt_text("compaction")},
        {
            "role": "user",
            "content": f"<conversation>\n{transcript}\n</conversation>\n\nWrite the seven-section summary now.",
        },
    ]
    parts = []
    try:
        for delta in model.stream(request):
            if delta.restart:  # asked again after breaking off: start over
                parts = []
            parts.append(delta.content)
    except ModelError as exc:
        raise ModelError(f"Compacting the context failed: {exc}") from exc
    summary = "".join(parts).strip()
    if summary.count("## ") < SECTIONS:
        raise ModelError("Compacting the context failed: the model's summary lacks the seven sections.")
    return Compacted(summary=summary, kept=keep)


def _render(message: dict) -> str:
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        text += f"\n[calls {call['function']['name']} with {call['function']['arguments']}]"
    return f"[{message['role']}]\n{text}"
