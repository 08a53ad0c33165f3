"""The agent engine: drives one turn and reports everything it does as events.

The lead agent works in steps: one model call per step, and at most one tool
call handled per step, its result fed back for the next step, until a reply
holds no tool call — that reply is the answer.
"""

import time
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from django.utils import timezone

from artifacts.manager import ArtifactManager
from artifacts.tools import ARTIFACT_TOOLS, Tool, ToolResult

from . import context
from .events import RunEventLog
from .llm import ModelError
from .models import RunEvent
from .selectors import LEAD_AGENT
from .toolcalls import OPEN_TAG, ToolCall, text_before_calls, toolcalls_parse

MAX_TOOL_ROUNDS = 12
# How much of a tool result the event log keeps for the page; the model gets all of it.
EVENT_RESULT_CHARS = 2000


@dataclass
class TurnResult:
    response: str
    metrics: dict = field(default_factory=dict)


@dataclass
class _Reply:
    content: str
    reasoning: str
    usage: dict | None
    duration_ms: int


class _ProseFilter:
    """Passes streamed text on up to the first tool call, holding back a tail
    that could be the start of one, so the page never shows call markup."""

    def __init__(self):
        self._buffer = ""
        self._stopped = False

    def feed(self, text: str) -> str:
        if self._stopped:
            return ""
        self._buffer += text
        at = self._buffer.find(OPEN_TAG)
        if at >= 0:
            self._stopped = True
            prose, self._buffer = self._buffer[:at], ""
            return prose
        keep = next((k for k in range(len(OPEN_TAG) - 1, 0, -1) if self._buffer.endswith(OPEN_TAG[:k])), 0)
        prose = self._buffer[: len(self._buffer) - keep]
        self._buffer = self._buffer[len(prose) :]
        return prose

    def finish(self) -> str:
        rest, self._buffer = ("" if self._stopped else self._buffer), ""
        return rest


def _model_call(*, model, messages: list[dict], log: RunEventLog, agent: str) -> _Reply:
    started = time.monotonic()
    parts, reasoning, usage = [], [], None
    prose = _ProseFilter()
    for delta in model.stream(messages):
        if delta.content:
            parts.append(delta.content)
            if shown := prose.feed(delta.content):
                log.chunk(agent=agent, content=shown)
        if delta.reasoning:
            reasoning.append(delta.reasoning)
        if delta.usage:
            usage = delta.usage
    if rest := prose.finish():
        log.chunk(agent=agent, content=rest)
    reply = _Reply(
        content="".join(parts).strip(),
        reasoning="".join(reasoning),
        usage=usage,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    log.emit(
        RunEvent.Type.LLM_COMPLETE,
        agent=agent,
        data={
            "content": reply.content,
            "reasoning": reply.reasoning,
            "token_usage": reply.usage,
            "duration_ms": reply.duration_ms,
        },
    )
    return reply


def _tool_run(*, call: ToolCall, tools: dict[str, Tool], artifacts: ArtifactManager) -> ToolResult:
    if call.error:
        return ToolResult(success=False, content=f"<error tool={quoteattr(call.name)}>{escape(call.error)}</error>")
    return tools[call.name].handler(artifacts, **call.params)


def _usage_add(total: dict | None, usage: dict | None) -> dict | None:
    if usage is None:
        return total
    total = dict(total or {})
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        total[key] = total.get(key, 0) + (usage.get(key) or 0)
    return total


def turn_execute(*, run, model, log: RunEventLog, artifacts: ArtifactManager) -> TurnResult:
    message = run.message
    started_at = timezone.now()
    tools = {tool.name: tool for tool in ARTIFACT_TOOLS}
    schemas = {name: tool.parameters for name, tool in tools.items()}
    log.emit(RunEvent.Type.AGENT_START, agent=LEAD_AGENT, data={"instruction": message.content})

    interactions: list[dict] = []
    tool_metrics: list[dict] = []
    usage, llm_duration_ms = None, 0
    for round_number in range(MAX_TOOL_ROUNDS + 1):
        system = context.system_prompt(agent=LEAD_AGENT, tools=list(tools.values()), artifacts=artifacts)
        messages = context.turn_messages(system=system, message=message) + interactions
        reply = _model_call(model=model, messages=messages, log=log, agent=LEAD_AGENT)
        usage = _usage_add(usage, reply.usage)
        llm_duration_ms += reply.duration_ms

        calls = toolcalls_parse(reply.content, schemas=schemas)
        if not calls:
            response = reply.content
            break
        if round_number == MAX_TOOL_ROUNDS:
            # The agent was told its rounds were spent and still called a tool:
            # what it wrote before the call is all the answer there is.
            response = text_before_calls(reply.content)
            break

        call = calls[0]
        log.emit(RunEvent.Type.TOOL_START, agent=LEAD_AGENT, data={"tool": call.name, "params": call.params})
        tool_started = time.monotonic()
        result = _tool_run(call=call, tools=tools, artifacts=artifacts)
        tool_ms = int((time.monotonic() - tool_started) * 1000)
        content = result.content
        if len(calls) > 1:
            content += f"\n<note>Only the first of your {len(calls)} tool calls was run: call one tool at a time.</note>"
        log.emit(
            RunEvent.Type.TOOL_COMPLETE,
            agent=LEAD_AGENT,
            data={
                "tool": call.name,
                "success": result.success,
                "result": content[:EVENT_RESULT_CHARS],
                "truncated": len(content) > EVENT_RESULT_CHARS,
                "duration_ms": tool_ms,
                **result.metadata,
            },
        )
        tool_metrics.append({"tool_name": call.name, "success": result.success, "duration_ms": tool_ms})

        rounds_left = MAX_TOOL_ROUNDS - round_number - 1
        if rounds_left == 0:
            content += "\n<note>You have used all your tool calls. Write your final answer now, without calling a tool.</note>"
        interactions += [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": f"<tool_result tool={quoteattr(call.name)}>\n{content}\n</tool_result>"},
        ]

    if not response:
        raise ModelError("The model returned an empty answer.")
    log.emit(RunEvent.Type.AGENT_COMPLETE, agent=LEAD_AGENT, data={"response": response})
    completed_at = timezone.now()
    return TurnResult(
        response=response,
        metrics={
            "started_at": started_at.isoformat(),
            "completed_at": completed_at.isoformat(),
            "total_duration_ms": int((completed_at - started_at).total_seconds() * 1000),
            "agent_executions": [
                {
                    "agent_name": LEAD_AGENT,
                    "model": model.name,
                    "token_usage": usage,
                    "llm_duration_ms": llm_duration_ms,
                    "started_at": started_at.isoformat(),
                    "completed_at": completed_at.isoformat(),
                }
            ],
            "tool_calls": tool_metrics,
        },
    )
