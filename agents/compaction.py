"""Compaction (seed 004): when an agent's context grows past a share of its
model's window, the older part is summarised by the model into seven sections
and the agent continues from the summary. The task plan lives in the system
prompt, which is never summarised, so progress survives.

The summary is asked for like any model call (agents.engine), so Stop and the
run's time limit hold while it is written. When the model cannot write one
(it fails, breaks off, refuses the request for its length, or answers without
the sections), the older context is cut instead (summary_truncated), with a
note in its place saying so: the turn goes on, and its activity shows why.
"""

from django.conf import settings
from django.utils.translation import gettext_noop

from .context import prompt_text
from .llm.base import ChatModel, ModelError
from .tokens import messages_tokens, tokens_prefix

# The newest tool call and its result stay verbatim: the agent is acting on them.
KEEP_INTERACTIONS = 2
SECTIONS = 7
# How many of the older context's newest messages a failed compaction keeps (seed 004).
PRESERVE_RECENT = 5


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


def compaction_request(*, messages: list[dict], keep: int) -> list[dict]:
    """The request that asks a model to summarise `messages` but the system
    prompt and the newest `keep` ones. The engine streams it like any model
    call, so Stop and the time limit hold while it runs."""
    older = messages[1 : len(messages) - keep]
    if not older:
        raise ModelError(gettext_noop("The context is too long for the model and there is nothing older to compact."))
    transcript = "\n\n".join(_render(message) for message in older)
    return [
        {"role": "system", "content": prompt_text("compaction")},
        {
            "role": "user",
            "content": f"<conversation>\n{transcript}\n</conversation>\n\nWrite the seven-section summary now.",
        },
    ]


def summary_checked(text: str) -> str:
    """The model's summary, or ModelError when it is not one."""
    summary = text.strip()
    if summary.count("## ") < SECTIONS:
        raise ModelError("the model's summary lacks the seven sections")
    return summary


def summary_truncated(*, messages: list[dict], keep: int, model: ChatModel, failure: str) -> str:
    """What stands for the older context when the model could not summarise
    it (seed 004 `preserve_recent`): its newest PRESERVE_RECENT messages, cut
    to a quarter of the room, and a note of what was lost."""
    older = messages[1 : len(messages) - keep]
    budget = int(_limit(model) / 4 / PRESERVE_RECENT)
    kept = older[-PRESERVE_RECENT:]
    parts = [_cut(_render(message), tokens=budget) for message in kept]
    dropped = len(older) - len(kept)
    note = (
        f"(Summarising the context failed: {failure}. So the older context was cut instead: "
        f"{dropped} earlier message{'s' if dropped != 1 else ''} dropped, the newest {len(kept)} below, "
        "long ones cut short. Whatever was written to artifacts is kept there in full: read them when you need more.)"
    )
    return "\n\n".join([note, *parts])


def _cut(text: str, *, tokens: int) -> str:
    start = tokens_prefix(text=text, tokens=tokens)
    return start if len(start) == len(text) else start + " […]"


def _render(message: dict) -> str:
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        text += f"\n[calls {call['function']['name']} with {call['function']['arguments']}]"
    return f"[{message['role']}]\n{text}"
