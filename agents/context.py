"""The messages an agent sees: its system prompt (role, tools, the task plan
and an inventory of the artifacts), the conversation along the branch, then
this turn's request and its tool interactions."""

from functools import cache
from pathlib import Path

from django.utils import timezone

from artifacts.edits import PeopleEdit
from artifacts.manager import ArtifactManager
from artifacts.selectors import TASK_PLAN
from conversations.tree import message_path

from .config import LEAD_AGENT, subagents_describe
from .llm.base import NATIVE
from .models import Run, RunEvent
from .tokens import tokens_prefix
from .toolcalls import toolcalls_describe

PROMPTS_DIR = Path(__file__).parent / "prompts"
# The start of each artifact the inventory shows: as many tokens in every
# script, so fifty Chinese characters where two hundred of English.
PREVIEW_CHARS, PREVIEW_TOKENS = 200, 50


@cache
def prompt_text(agent: str) -> str:
    return (PROMPTS_DIR / f"{agent}.md").read_text()


NATIVE_TOOLS_TEXT = (
    "# Tools\n\nCall one tool at a time and wait for its result. A reply without a tool call is your final answer."
)


def system_prompt(*, config, artifacts: ArtifactManager, tool_mode: str, project=None) -> str:
    """The agent's role, its tools, and for the lead the subagents, the
    standing instructions of the conversation's `project`, the current time,
    the whole task plan and an inventory of the artifacts (seed 004)."""
    # Native function calling sends the tools' schemas beside the messages.
    tools = NATIVE_TOOLS_TEXT if tool_mode == NATIVE else toolcalls_describe(config.tools)
    parts = [prompt_text(config.name), tools]
    if config.name != LEAD_AGENT:
        return "\n\n".join(parts)
    parts.append(subagents_describe())
    if project is not None and project.instructions:
        parts.append(_project_text(project))
    # After the parts that never change, so a provider's prompt cache keeps them (seed 003 <system_time>).
    parts.append(_time_text())
    inventory = artifacts.inventory()
    plan = next((a for a in inventory if a["artifact_id"] == TASK_PLAN), None)
    if plan is not None:
        # The whole plan, every call: it is how progress survives a long turn.
        parts.append(f"# Current task plan (artifact task_plan, version {plan['version']})\n\n{plan['content']}")
    parts.append(_inventory_text(inventory))
    edits = artifacts.people_edits()
    if edits:
        parts.append(_people_edits_text(edits, person=_person(artifacts)))
    return "\n\n".join(parts)


def _project_text(project) -> str:
    # Before the time, among the parts that stay the same from call to call.
    return (
        f"# Project instructions\n\nThis conversation is part of the project “{project.name}”. "
        "Its team set these standing instructions for every conversation in it; follow them unless "
        f"the user asks otherwise:\n\n{project.instructions}"
    )


def _person(artifacts: ArtifactManager) -> str:
    """Who edits a conversation's artifacts: its owner, the only one who can."""
    owner = artifacts.session.conversation.owner
    return owner.get_full_name() or owner.get_username()


def _people_edits_text(edits: dict[str, PeopleEdit], *, person: str) -> str:
    lines = [
        "# Changed by people",
        "",
        "A person changed these artifacts since an agent last saved them. What they wrote is the user's "
        "work: change such an artifact with update_artifact and keep their text; never rewrite it away.",
        "",
    ]
    today = timezone.localdate()
    for edit in edits.values():
        at = timezone.localtime(edit.at)
        when = f"{at:%H:%M}" if at.date() == today else f"{at:%Y-%m-%d %H:%M}"
        lines.append(
            f"- `{edit.artifact_id}` (version {edit.version}, after version {edit.since_version}): "
            f"edited by {person} at {when}: {edit.summary}"
        )
        if edit.diff:
            lines.append("  ```diff\n" + "\n".join(f"  {line}" for line in edit.diff.splitlines()) + "\n  ```")
        else:
            lines.append(f"  (Too long to show here: read_artifact `{edit.artifact_id}` before you change it.)")
    return "\n".join(lines)


def _time_text() -> str:
    now = timezone.localtime()
    return (
        f"# Current time\n\n{now:%A} {now.isoformat(sep=' ', timespec='minutes')} "
        f"(time zone {timezone.get_current_timezone_name()}). Judge what is recent or out of date by it."
    )


def _inventory_text(inventory: list[dict]) -> str:
    if not inventory:
        return "# Artifacts\n\nThis conversation has no artifacts yet."
    lines = ["# Artifacts", ""]
    for artifact in inventory:
        if not artifact["is_text"]:
            preview = "(a stored file, not text)"
        else:
            start = " ".join(artifact["content"].split())[:PREVIEW_CHARS]
            preview = tokens_prefix(text=start, tokens=PREVIEW_TOKENS) or "(empty)"
        lines.append(
            f"- `{artifact['artifact_id']}` — {artifact['title']} ({artifact['content_type']}, "
            f"version {artifact['version']}, from {artifact['source']}): {preview}"
        )
    return "\n".join(lines)


def agent_messages(
    *, system: str, message, instruction: str, summary: str, interactions: list[dict], history: list[dict] = ()
) -> list[dict]:
    """The lead sees the conversation along the branch (`message`, from the
    latest compaction on) and the request; a subagent its `history` (its
    earlier activations this turn) and its instruction. Then the compacted
    summary, if any, and this activation's tool interactions."""
    messages = [{"role": "system", "content": system}]
    if message is None:
        messages += history
        messages.append({"role": "user", "content": instruction})
    elif not summary:
        messages += _history(message)
    if summary:
        messages.append({"role": "user", "content": f"<context_summary>\n{summary}\n</context_summary>"})
    if message is not None:
        messages.append({"role": "user", "content": message.content})
    return messages + interactions


def _history(message) -> list[dict]:
    path = message_path(message_id=message.pk)[:-1]
    start, history = 0, []
    boundary = (
        RunEvent.objects.filter(
            type=RunEvent.Type.COMPACTION,
            agent=LEAD_AGENT,
            run__message_id__in=[m.pk for m in path],
            # A failed or cancelled attempt's summary may stand for work that
            # was lost or never answered; only a finished turn's is the past.
            run__status=Run.Status.COMPLETED,
        )
        .order_by("-id")
        .values_list("run__message_id", "data")
        .first()
    )
    if boundary is not None:
        # An earlier turn was compacted: its summary stands for everything
        # before and including that turn's request.
        message_id, data = boundary
        start = next(i for i, m in enumerate(path) if m.pk == message_id)
        history.append({"role": "user", "content": f"<context_summary>\n{data['summary']}\n</context_summary>"})
        if path[start].response:
            history.append({"role": "assistant", "content": path[start].response})
        start += 1
    for earlier in path[start:]:
        history.append({"role": "user", "content": earlier.content})
        if earlier.response:
            history.append({"role": "assistant", "content": earlier.response})
    return history
