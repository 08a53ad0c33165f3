"""The messages an agent sees: its system prompt (role, tools, the task plan
and an inventory of the artifacts), the conversation along the branch, then
this turn's request and its tool interactions."""

from functools import cache
from pathlib import Path

from artifacts.manager import ArtifactManager
from artifacts.selectors import TASK_PLAN
from conversations.selectors import message_path

from .config import LEAD_AGENT, subagents_describe
from .toolcalls import toolcalls_describe

PROMPTS_DIR = Path(__file__).parent / "prompts"
PREVIEW_CHARS = 200


@cache
def prompt_text(agent: str) -> str:
    return (PROMPTS_DIR / f"{agent}.md").read_text()


def system_prompt(*, config, artifacts: ArtifactManager) -> str:
    """The agent's role, its tools, and for the lead the subagents, the whole
    task plan and an inventory of the artifacts (seed 004)."""
    parts = [prompt_text(config.name), toolcalls_describe(config.tools)]
    if config.name != LEAD_AGENT:
        return "\n\n".join(parts)
    parts.append(subagents_describe())
    inventory = artifacts.inventory()
    plan = next((a for a in inventory if a["artifact_id"] == TASK_PLAN), None)
    if plan is not None:
        # The whole plan, every call: it is how progress survives a long turn.
        parts.append(f"# Current task plan (artifact task_plan, version {plan['version']})\n\n{plan['content']}")
    parts.append(_inventory_text(inventory))
    return "\n\n".join(parts)


def _inventory_text(inventory: list[dict]) -> str:
    if not inventory:
        return "# Artifacts\n\nThis conversation has no artifacts yet."
    lines = ["# Artifacts", ""]
    for artifact in inventory:
        content = artifact["content"]
        preview = " ".join(content.split())[:PREVIEW_CHARS] if content else "(a stored file, not text)"
        lines.append(
            f"- `{artifact['artifact_id']}` — {artifact['title']} ({artifact['content_type']}, "
            f"version {artifact['version']}, from {artifact['source']}): {preview}"
        )
    return "\n".join(lines)


def turn_messages(*, system: str, message) -> list[dict]:
    messages = [{"role": "system", "content": system}]
    for earlier in message_path(message_id=message.pk)[:-1]:
        messages.append({"role": "user", "content": earlier.content})
        if earlier.response:
            messages.append({"role": "assistant", "content": earlier.response})
    messages.append({"role": "user", "content": message.content})
    return messages
