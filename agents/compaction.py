"""Compaction (seed 004): when an agent's context grows past a share of its
model's window, the older part is summarised by the model into seven sections
and the agent continues from the summary. The task plan lives in the system
prompt, which is never summarised, so progress survives.

A compaction that fails is a ModelError: the turn stops with a visible reason
rather than continuing on a silently truncated context.
"""

import json
from dataclasses import dataclass

from django.conf import settings

from .context import prompt_text
from .llm.base import ChatModel, ModelError

# The newest tool call and its result stay verbatim: the agent is acting on them.
KEEP_INTERACTIONS = 2
SECTIONS = 7


@dataclass
class Compacted:
    summary: str
    kept: int  # how many of the newest interactions stay as they were
    tokens_before: int


def tokens_estimate(messages: list[dict]) -> int:
    """Roughly four characters a token: close enough to decide when to compact,
    with no tokenizer to download."""
    chars = 0
    for message in messages:
        chars += len(message.get("content") or "")
        if message.get("tool_calls"):
            chars += len(json.dumps(message["tool_calls"]))
    return chars // 4


def _limit(model: ChatModel) -> float:
    return settings.COMPACTION_THRESHOLD * model.context_window


def needed(*, messages: list[dict], model: ChatModel) -> bool:
    return tokens_estimate(messages) > _limit(model)


def keep_count(*, interactions: list[dict], model: ChatModel) -> int:
    """How many of the newest interactions stay verbatim: the last call and its
    result, unless they alone would fill half the room again."""
    if len(interactions) <= KEEP_INTERACTIONS:
        return 0
    newest = interactions[-KEEP_INTERACTIONS:]
    return KEEP_INTERACTIONS if tokens_estimate(newest) < _limit(model) / 2 else 0


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
    return Compacted(summary=summary, kept=keep, tokens_before=tokens_estimate(messages))


def _render(message: dict) -> str:
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        text += f"\n[calls {call['function']['name']} with {call['function']['arguments']}]"
    return f"[{message['role']}]\n{text}"
