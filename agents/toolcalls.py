"""Tool calls written in the model's text, for models without reliable native
function calling (seed 003). A call looks like:

    <tool_call>
      <name>update_artifact</name>
      <params>
        <id>task_plan</id>
        <old_str>- [ ] search</old_str>
        <new_str>- [x] search</new_str>
      </params>
    </tool_call>

Parameter values are taken verbatim (an optional CDATA wrapper is removed), so
markdown and code with angle brackets survive. Only the parameter names the
tool declares are looked for, which keeps tags inside values from being
mistaken for parameters.
"""

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

OPEN_TAG = "<tool_call>"
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_NAME = re.compile(r"<name>\s*(.*?)\s*</name>", re.DOTALL)


@dataclass
class ToolCall:
    name: str
    params: dict = field(default_factory=dict)
    # Why the call cannot run as written, for the model to correct.
    error: str = ""
    # The id a native function call is answered under.
    id: str = ""


def text_before_calls(text: str) -> str:
    """The prose a reply holds before its first tool call."""
    return text.split(OPEN_TAG, 1)[0].strip()


def toolcalls_parse(text: str, *, schemas: dict[str, dict]) -> list[ToolCall]:
    """Every tool call in `text`, in order. `schemas` maps a tool's name to the
    JSON schema of its parameters."""
    calls = []
    for body in _CALL.findall(text):
        name_match = _NAME.search(body)
        name = name_match.group(1) if name_match else ""
        schema = schemas.get(name)
        if schema is None:
            known = ", ".join(sorted(schemas))
            calls.append(ToolCall(name=name, error=f"There is no tool '{name}'. Available tools: {known}."))
            continue
        calls.append(_params_read(name, body, schema))
    return calls


def toolcalls_from_native(calls: list[dict], *, schemas: dict[str, dict]) -> list[ToolCall]:
    """Native function calls (id, name, JSON arguments) checked like written ones."""
    parsed = []
    for native in calls:
        name = native["name"]
        call = ToolCall(name=name, id=native["id"])
        parsed.append(call)
        schema = schemas.get(name)
        if schema is None:
            call.error = f"There is no tool '{name}'. Available tools: {', '.join(sorted(schemas))}."
            continue
        try:
            params = json.loads(native["arguments"] or "{}")
        except json.JSONDecodeError as exc:
            call.error = f"The arguments of {name} are not valid JSON ({exc.msg}); send them as a JSON object."
            continue
        if not isinstance(params, dict):
            call.error = f"The arguments of {name} must be a JSON object."
            continue
        properties = schema.get("properties", {})
        call.params = {key: value for key, value in params.items() if key in properties}
        for param, value in call.params.items():
            if properties[param].get("type") == "integer" and not isinstance(value, int):
                call.error = f"Parameter '{param}' of {name} must be a whole number, not {value!r}."
            elif properties[param].get("type") == "string" and not isinstance(value, str):
                call.params[param] = json.dumps(value)
        if not call.error:
            call.error = _missing(name, call.params, schema, how="in the JSON arguments")
    return parsed


def _missing(name: str, params: dict, schema: dict, *, how: str) -> str:
    missing = [p for p in schema.get("required", []) if p not in params]
    return f"{name} needs the parameter(s) {', '.join(missing)}, {how}." if missing else ""


def _params_read(name: str, body: str, schema: dict) -> ToolCall:
    call = ToolCall(name=name)
    for param, spec in schema.get("properties", {}).items():
        cdata = re.search(rf"<{param}>\s*<!\[CDATA\[(.*?)\]\]>\s*</{param}>", body, re.DOTALL)
        if cdata is not None:
            value = cdata.group(1)
        else:
            match = re.search(rf"<{param}>(.*?)</{param}>", body, re.DOTALL)
            if match is None:
                continue
            value = _strip_layout(match.group(1))
        if spec.get("type") == "integer":
            try:
                value = int(value.strip())
            except ValueError:
                call.error = f"Parameter '{param}' of {name} must be a whole number, not {value.strip()!r}."
                return call
        call.params[param] = value
    call.error = _missing(name, call.params, schema, how="each written as <name>value</name> inside <params>")
    return call


def _strip_layout(value: str) -> str:
    # Models often put a value on its own line inside the tag; that newline is
    # layout, not content. Inner newlines and indentation are kept.
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def toolcalls_describe(tools: Iterable) -> str:
    """The tool section of a system prompt: how to call, and each tool's parameters."""
    lines = [
        "# Tools",
        "",
        "To use a tool, end your reply with exactly one call in this form and wait for its result:",
        "",
        "<tool_call>",
        "  <name>TOOL_NAME</name>",
        "  <params>",
        "    <PARAMETER>value</PARAMETER>",
        "  </params>",
        "</tool_call>",
        "",
        "Values are written as they are; wrap a value in <![CDATA[ ... ]]> if it contains the closing tag.",
        "One tool call per reply. A reply without a tool call is your final answer.",
        "",
    ]
    for tool in tools:
        lines.append(f"## {tool.name}")
        lines.append(tool.description)
        required = set(tool.parameters.get("required", []))
        for param, spec in tool.parameters.get("properties", {}).items():
            need = "required" if param in required else "optional"
            about = f": {spec['description']}" if spec.get("description") else ""
            lines.append(f"- `{param}` ({spec.get('type', 'string')}, {need}){about}")
        lines.append("")
    return "\n".join(lines)
