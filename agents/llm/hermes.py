"""Function calls written in the answer text, Hermes-style,

    <tool_call>
    {"name": "create_artifact", "arguments": {"id": "notes", "content": "…"}}
    </tool_call>

as Qwen, Hermes and other open models write them when their server has no
tool parser to turn them into the API's `tool_calls` (vLLM without
--enable-auto-tool-choice, a llama.cpp or LM Studio build without one). Told
apart from the prose as the stream arrives, so the page never shows the
markup, and handed on as native calls."""

import json
import re

OPEN = "<tool_call>"
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')


class HermesCalls:
    """Feeds on an answer's text and hands back the prose before the first
    call; `finish` gives the rest of the prose and the calls, each as the
    stream's native ones are: id, name, arguments (JSON text)."""

    def __init__(self):
        self._held = ""
        self._calling = False

    def feed(self, text: str) -> str:
        self._held += text
        if self._calling:
            return ""
        at = self._held.find(OPEN)
        if at >= 0:
            self._calling = True
            prose, self._held = self._held[:at], self._held[at:]
            return prose
        keep = next((k for k in range(len(OPEN) - 1, 0, -1) if self._held.endswith(OPEN[:k])), 0)
        prose, self._held = self._held[: len(self._held) - keep], self._held[len(self._held) - keep :]
        return prose

    def finish(self) -> tuple[str, list[dict]]:
        held, self._held = self._held, ""
        if not self._calling:
            return held, []
        return "", [_call(body.strip(), number=n) for n, body in enumerate(_CALL.findall(held))]


def _call(body: str, *, number: int) -> dict:
    """One call; a body that is not the JSON it should be still becomes a
    call, whose arguments the engine finds invalid and tells the model so."""
    call_id = f"call_text_{number}"
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        name = _NAME.search(body)
        return {"id": call_id, "name": name.group(1) if name else "", "arguments": body}
    if not isinstance(data, dict):
        return {"id": call_id, "name": "", "arguments": body}
    # "arguments" as the Hermes template has it; some models write "parameters".
    arguments = data.get("arguments", data.get("parameters", {}))
    return {
        "id": call_id,
        "name": str(data.get("name", "")),
        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
    }
