"""The messages an agent sees: its role prompt, the conversation along the
branch, then this turn's request."""

from functools import cache
from pathlib import Path

from conversations.selectors import message_path

PROMPTS_DIR = Path(__file__).parent / "prompts"


@cache
def prompt_text(agent: str) -> str:
    return (PROMPTS_DIR / f"{agent}.md").read_text()


def turn_messages(*, agent: str, message) -> list[dict]:
    messages = [{"role": "system", "content": prompt_text(agent)}]
    for earlier in message_path(message_id=message.pk)[:-1]:
        messages.append({"role": "user", "content": earlier.content})
        if earlier.response:
            messages.append({"role": "assistant", "content": earlier.response})
    messages.append({"role": "user", "content": message.content})
    return messages
