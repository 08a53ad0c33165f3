"""The agent engine: drives one turn and reports everything it does as events."""

import time
from dataclasses import dataclass, field

from django.utils import timezone

from . import context
from .events import RunEventLog
from .llm import ModelError
from .models import RunEvent
from .selectors import LEAD_AGENT


@dataclass
class TurnResult:
    response: str
    metrics: dict = field(default_factory=dict)


def turn_execute(*, run, model, log: RunEventLog) -> TurnResult:
    message = run.message
    started_at = timezone.now()
    log.emit(RunEvent.Type.AGENT_START, agent=LEAD_AGENT, data={"instruction": message.content})

    llm_started = time.monotonic()
    parts, reasoning, usage = [], [], None
    for delta in model.stream(context.turn_messages(agent=LEAD_AGENT, message=message)):
        if delta.content:
            parts.append(delta.content)
            log.chunk(agent=LEAD_AGENT, content=delta.content)
        if delta.reasoning:
            reasoning.append(delta.reasoning)
        if delta.usage:
            usage = delta.usage
    llm_duration_ms = int((time.monotonic() - llm_started) * 1000)
    response = "".join(parts).strip()
    if not response:
        raise ModelError("The model returned an empty answer.")

    log.emit(
        RunEvent.Type.LLM_COMPLETE,
        agent=LEAD_AGENT,
        data={
            "content": response,
            "reasoning": "".join(reasoning),
            "token_usage": usage,
            "duration_ms": llm_duration_ms,
        },
    )
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
            "tool_calls": [],
        },
    )
