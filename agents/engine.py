"""The agent engine (seed 004): drives one turn and reports everything it does
as events.

Agents work in steps: one model call per step and at most one tool call
handled per step, its result fed back for the next step, until a reply holds
no tool call — that reply is the agent's response. The lead agent delegates
with `call_subagent`: the subagent's steps run on top of the lead's, and its
response comes back to the lead as the call's result.

Everything the turn needs to continue lives in a TurnState (agents.state),
which the caller checkpoints after every step. A tool that needs the user's approval ends
`turn_execute` with the state saved; a later call continues from it.
"""

import dataclasses
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from xml.sax.saxutils import escape, quoteattr

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_noop

from artifactflow import metrics
from artifactflow.db import connection_release
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from artifacts.validators import TITLE_MAX_CHARS
from projects.access import project_viewable

from . import budgets, compaction, context, tokens
from .config import (
    AGENTS,
    CALL_SUBAGENT,
    LEAD_AGENT,
    SUBAGENTS,
    AgentConfig,
    max_tool_rounds,
)
from .event_schema import NoReportOutput, ReportOutput
from .events import RunEventLog
from .llm.base import NATIVE, ChatModel, ContextOverflow, ModelError
from .llm.config import AgentModels
from .models import RunEvent
from .state import (
    ALLOWING,
    REFUSED_MESSAGES,
    Frame,
    OutcomeStatus,
    PendingRequest,
    PermissionDecision,
    Phase,
    TurnState,
)
from .toolcalls import (
    OPEN_TAG,
    ToolCall,
    text_before_calls,
    toolcalls_from_native,
    toolcalls_parse,
)
from .tools.base import CONFIRM, Tool, ToolContext, ToolResult, tool_error
from .tools.registry import Unavailable, configured_tools

# How much of a tool result the event log keeps for the page; the model gets all of it.
EVENT_RESULT_CHARS = 2000
# How much of one tool parameter the event log keeps: the whole of a large
# create or rewrite is in the llm_complete event that asked for it already.
EVENT_PARAM_CHARS = 2000
# How much of one parameter a permission request carries, for the prompt to
# show whole: the person asked sees exactly what would run, so a call with a
# longer parameter can only be denied (permission_unshowable).
PERMISSION_PARAM_CHARS = 50_000
# What a model call is for, in its metrics record: an agent's step, or summarising its context.
STEP, COMPACTION = "step", "compaction"
# How often a streaming model call looks at the cancel flag.
CANCEL_CHECK_SECONDS = 0.3
# From this many tool calls left, the lead is told how many, so it can plan
# its answer rather than be cut off (seed 003); a subagent has only a few.
ROUNDS_LEFT_WARNING = 5


class Cancelled(Exception):
    """The user cancelled the turn."""


class TimeLimitExceeded(ModelError):
    """The turn ran past RUN_TIME_LIMIT; it fails with this message, as on a model error."""


@dataclass
class TurnOutcome:
    status: OutcomeStatus
    response: str
    metrics: dict
    # The open permission request of a turn that waits for it.
    pending: PendingRequest | None = None
    # The tools a scheduled turn did not call, as they wait for an approval no one is there to give.
    skipped: tuple[str, ...] = ()


def permission_request_data(pending: PendingRequest) -> dict:
    """The permission_request event of a turn's open question. The service
    logs it in the transaction that marks the run as waiting: a page that
    takes a run's status from its row never sees the question before the
    row says the run waits, nor misses it after."""
    params = _event_params(pending.params, limit=PERMISSION_PARAM_CHARS)
    request = {"request": pending.request} if pending.request else {}
    return {"id": pending.id, "tool": pending.tool, "expires_at": pending.expires_at, **params, **request}


def permission_unshowable(params: dict) -> str:
    """Why a call with these params cannot be approved (a parameter too long
    for its prompt to show whole), or "" when it can."""
    cut = _event_params(params, limit=PERMISSION_PARAM_CHARS).get("params_truncated", {})
    if not cut:
        return ""
    named = " and ".join(f"{name} ({length:,} characters)" for name, length in cut.items())
    return (
        f"its parameter {named} is longer than the {PERMISSION_PARAM_CHARS:,} characters a person can be shown "
        "whole to approve it"
    )


@dataclass
class _Reply:
    content: str
    reasoning: str
    usage: dict | None
    duration_ms: int
    tool_calls: list[dict]
    # How long the model thought: from the call's start to its first answer text, or its end.
    reasoning_ms: int | None = None


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


class Turn:
    def __init__(
        self,
        *,
        run,
        models: AgentModels,
        log: RunEventLog,
        artifacts: ArtifactManager,
        is_cancelled: Callable[[], bool],
        checkpoint: Callable[[TurnState], None],
    ):
        self.run = run
        self.message = run.message
        self.models = models
        self.log = log
        self.artifacts = artifacts
        self.is_cancelled = is_cancelled
        self.checkpoint = checkpoint
        conversation = self.message.conversation
        self.owner = owner = conversation.owner
        # The project's instructions and library are the turn's while its owner may read the project.
        self.project = (
            project_viewable(user=owner, project_id=conversation.project_id) if conversation.project_id else None
        )
        self.tool_context = ToolContext(
            artifacts=artifacts,
            user=owner,
            run_id=run.pk,
            conversation_id=conversation.pk,
            project_id=self.project.pk if self.project else None,
        )
        # Configured tool sources that could not be reached: the turn goes on without them.
        self.unavailable: list[Unavailable] = []
        self.configs = agent_configs(user=owner, unavailable=self.unavailable)
        self.shown = ""  # the lead's prose of the current step, kept if the turn is cancelled
        # Counted per worker task: time spent waiting for the user is not the turn's.
        self.deadline = time.monotonic() + settings.RUN_TIME_LIMIT

    def execute(self, state: TurnState) -> TurnOutcome:
        if state.phase == Phase.COMPLETED:
            return self._outcome(OutcomeStatus.COMPLETED, state, response=state.response)
        try:
            if state.steps == 0 and state.pending is None:
                self.log.emit(
                    RunEvent.Type.AGENT_START, agent=LEAD_AGENT, data={"instruction": state.frames[0].instruction}
                )
                self._unavailable_report()
            if state.pending is not None:
                if state.pending.decision is None:
                    return self._outcome(OutcomeStatus.WAITING_PERMISSION, state)
                self._pending_resolve(state)
                self.checkpoint(state)
            while True:
                self._interrupts_check()
                finished = self._step(state)
                state.steps += 1
                self.checkpoint(state)
                if finished is not None:
                    return finished
        except Cancelled:
            return self._outcome(OutcomeStatus.CANCELLED, state, response=self.shown.strip())

    # --- one step ---------------------------------------------------------------

    def _step(self, state: TurnState) -> TurnOutcome | None:
        frame = state.frames[-1]
        config = self.configs[frame.agent]
        # Before the model call: a misconfigured limit fails the turn before it costs one.
        rounds = max_tool_rounds(frame.agent)
        tools = {tool.name: tool for tool in config.tools}
        reply = self._model_call(state, frame, config)
        schemas = {name: tool.parameters for name, tool in tools.items()}
        if self._native(frame.agent):
            calls = toolcalls_from_native(reply.tool_calls, schemas=schemas)
        else:
            calls = toolcalls_parse(reply.content, schemas=schemas)

        if not calls or frame.rounds >= rounds:
            # Past its rounds the agent was told to answer; what it wrote
            # before another call is all the answer there is.
            response = text_before_calls(reply.content) if calls else reply.content
            return self._agent_finish(
                state, frame, response, out_of_rounds=bool(calls), thought=bool(reply.reasoning.strip())
            )

        call = calls[0]
        frame.rounds += 1
        frame.interactions.append(self._call_message(frame, reply, call))
        if len(calls) > 1:
            frame.notes.append(f"Only the first of your {len(calls)} tool calls was run: call one tool at a time.")
        left = rounds - frame.rounds
        if left == 0:
            frame.notes.append(
                "You have used all your tool calls. Write your final answer now, without calling a tool."
            )
        elif left <= ROUNDS_LEFT_WARNING and frame.agent == LEAD_AGENT:
            frame.notes.append(
                f"You have {left} tool call{'s' if left > 1 else ''} left; then write your final answer."
            )

        if call.error:
            self._tool_report(state, frame, call, tool_error(tool=call.name, message=call.error))
            return None
        if call.name == CALL_SUBAGENT:
            self._tool_start(frame, call)
            self._subagent_start(state, frame, call)
            return None
        tool = tools[call.name]
        if _needs_permission(tool, state):
            if self.run.schedule_id is not None:
                self._unattended_skip(state, frame, call)
                return None
            return self._permission_request(state, frame, call, tool)
        self._tool_execute(state, frame, tool, call)
        return None

    def _interrupts_check(self) -> None:
        if self.is_cancelled():
            raise Cancelled
        if time.monotonic() > self.deadline:
            limit = settings.RUN_TIME_LIMIT
            said = f"{limit // 60} minutes" if limit % 60 == 0 else f"{limit} seconds"
            raise TimeLimitExceeded(f"The turn ran past its time limit of {said} and was stopped.")

    def _native(self, agent: str) -> bool:
        return self.models.for_agent(agent).tool_mode == NATIVE

    def _call_message(self, frame: Frame, reply: _Reply, call: ToolCall) -> dict:
        if not self._native(frame.agent):
            return {"role": "assistant", "content": reply.content}
        # Only the call that runs is kept, so it is the only one owed a result.
        native = next(c for c in reply.tool_calls if c["id"] == call.id)
        return {
            "role": "assistant",
            "content": reply.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": native["name"], "arguments": native["arguments"]},
                }
            ],
        }

    def _messages(self, frame: Frame, config: AgentConfig, model: ChatModel) -> list[dict]:
        system = context.system_prompt(
            config=config, artifacts=self.artifacts, tool_mode=model.tool_mode, project=self.project
        )
        return context.agent_messages(
            system=system,
            message=self.message if config.sees_history else None,
            history=frame.history,
            instruction=frame.instruction,
            summary=frame.summary,
            interactions=frame.interactions,
        )

    def _model_call(self, state: TurnState, frame: Frame, config: AgentConfig) -> _Reply:
        state.phase = Phase.LEAD_EXECUTING if frame.agent == LEAD_AGENT else Phase.SUBAGENT_EXECUTING
        model = self.models.for_agent(frame.agent)
        messages = self._messages(frame, config, model)
        estimate = self._tokens_estimate(messages, config, model)
        size = compaction.context_tokens(
            estimate=estimate, reported=frame.reported_tokens, reported_estimate=frame.reported_estimate
        )
        if compaction.needed(tokens=size, model=model):
            messages, estimate = self._compact(state, frame, config, model, messages, tokens_before=size)
        try:
            reply = self._stream(state, frame.agent, model, messages, tools=config.tools, estimate=estimate)
        except ContextOverflow:
            # The service counts otherwise than the estimate (another tokenizer,
            # a smaller window than configured): compact and ask once more, as
            # the upstream project does.
            messages, estimate = self._compact(
                state, frame, config, model, messages, tokens_before=max(size, model.context_window)
            )
            try:
                reply = self._stream(state, frame.agent, model, messages, tools=config.tools, estimate=estimate)
            except ContextOverflow as again:
                raise ModelError(
                    f"The conversation is too long for the model {model.name}, even after its context was "
                    f"summarised. {again} Start a new conversation, or set the model's context_window to what "
                    "the service allows."
                ) from again
        if reply.usage and reply.usage.get("prompt_tokens"):
            frame.reported_tokens, frame.reported_estimate = reply.usage["prompt_tokens"], estimate
        else:
            frame.reported_tokens = frame.reported_estimate = 0
        self.log.emit(
            RunEvent.Type.LLM_COMPLETE,
            agent=frame.agent,
            data={
                "content": reply.content,
                "reasoning": reply.reasoning,
                "tool_calls": reply.tool_calls,
                "token_usage": reply.usage,
                "duration_ms": reply.duration_ms,
                **({"reasoning_ms": reply.reasoning_ms} if reply.reasoning else {}),
            },
        )
        return reply

    def _stream(
        self,
        state: TurnState,
        agent: str,
        model: ChatModel,
        messages: list[dict],
        *,
        estimate: int,
        tools=(),
        purpose: str = STEP,
    ) -> _Reply:
        """One model call, streamed: Stop and the time limit are checked as it
        arrives, a step's prose and thinking are shown as they come, and the
        call is recorded in the metrics however it ends. The thinking is
        never part of the reply's content, which is what the model is shown
        of its own turn again. The call is made within the owner's budget
        (agents.budgets), `estimate` being the request's tokens."""
        started_at, started = timezone.now(), time.monotonic()
        parts, reasoning, usage, tool_calls = [], [], None, []
        reasoning_ms = None
        prose = _ProseFilter()
        if purpose == STEP:
            self.shown = ""
        checked = time.monotonic()
        success = failed = False
        reservation = budgets.spend_reserve(user=self.owner, estimate=estimate)
        # The call may take minutes: the database connection is not held meanwhile.
        connection_release()
        stream = model.stream(messages, tools=tools)
        try:
            for delta in stream:
                if delta.restart:
                    # The stream broke off and is asked again: what came so far is void.
                    parts, reasoning, prose, reasoning_ms = [], [], _ProseFilter(), None
                    if purpose == STEP:
                        self.shown = ""
                    self.log.emit(RunEvent.Type.LLM_RETRY, agent=agent, data={"reason": delta.restart})
                if delta.reasoning:
                    reasoning.append(delta.reasoning)
                    # A summary's thinking is not shown: the page shows its summary.
                    if purpose == STEP:
                        self.log.chunk(agent=agent, reasoning=delta.reasoning)
                if delta.content:
                    if reasoning and reasoning_ms is None:
                        reasoning_ms = int((time.monotonic() - started) * 1000)
                    parts.append(delta.content)
                    if purpose == STEP:
                        self._show(agent, prose.feed(delta.content))
                if delta.usage:
                    usage = delta.usage
                tool_calls += delta.tool_calls
                if time.monotonic() - checked >= CANCEL_CHECK_SECONDS:
                    checked = time.monotonic()
                    self._interrupts_check()
            success = True
        except ModelError:
            failed = True
            raise
        finally:
            # Closing the generator closes the HTTP stream to the model.
            stream.close()
            counted = _usage_counted(usage, reasoning="".join(reasoning))
            metrics.model_call_observe(
                model=model.name,
                purpose=purpose,
                outcome="ok" if success else "error" if failed else "stopped",
                seconds=time.monotonic() - started,
                usage=budgets.usage_believed(counted),
            )
            state.agent_executions.append(
                {
                    "agent_name": agent,
                    "model": model.name,
                    "purpose": purpose,
                    "success": success,
                    "token_usage": counted,
                    "llm_duration_ms": int((time.monotonic() - started) * 1000),
                    "started_at": started_at.isoformat(),
                    "completed_at": timezone.now().isoformat(),
                }
            )
            budgets.spend_settle(
                reservation=reservation,
                usage=counted,
                reply="".join(parts) + "".join(reasoning),
                model=model.name,
                kind=agent if purpose == STEP else purpose,
            )
        if purpose == STEP:
            self._show(agent, prose.finish())
        duration_ms = state.agent_executions[-1]["llm_duration_ms"]
        return _Reply(
            content="".join(parts).strip(),
            reasoning="".join(reasoning),
            usage=usage,
            duration_ms=duration_ms,
            tool_calls=tool_calls,
            reasoning_ms=duration_ms if reasoning_ms is None else reasoning_ms,
        )

    def _tokens_estimate(self, messages: list[dict], config: AgentConfig, model: ChatModel) -> int:
        """The estimated tokens of a request of `messages`."""
        size = tokens.messages_tokens(messages=messages)
        if model.tool_mode == NATIVE:
            # The tools' schemas go beside the messages, and count against the window as they do.
            schemas = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in config.tools]
            size += tokens.tokens_estimate(text=json.dumps(schemas, ensure_ascii=False))
        return size

    def _compact(
        self,
        state: TurnState,
        frame: Frame,
        config: AgentConfig,
        model: ChatModel,
        messages: list[dict],
        *,
        tokens_before: int,
    ) -> tuple[list[dict], int]:
        """Summarise the agent's older context, or cut it when the model
        cannot; returns the messages that replace `messages`, and their
        estimated tokens."""
        keep = compaction.keep_count(interactions=frame.interactions, model=model)
        request = compaction.compaction_request(messages=messages, keep=keep)
        self.log.emit(RunEvent.Type.COMPACTION_START, agent=frame.agent, data={"tokens_before": tokens_before})
        failure = ""
        try:
            reply = self._stream(
                state,
                frame.agent,
                model,
                request,
                purpose=COMPACTION,
                estimate=tokens.messages_tokens(messages=request),
            )
            summary = compaction.summary_checked(reply.content)
        except TimeLimitExceeded:
            raise
        except ModelError as exc:
            failure = str(exc)
            summary = compaction.summary_truncated(messages=messages, keep=keep, model=model, failure=failure)
        frame.summary, frame.history = summary, []
        frame.interactions = frame.interactions[len(frame.interactions) - keep :] if keep else []
        compacted = self._messages(frame, config, model)
        estimate = self._tokens_estimate(compacted, config, model)
        self.log.emit(
            RunEvent.Type.COMPACTION,
            agent=frame.agent,
            data={
                "summary": summary,
                "tokens_before": tokens_before,
                "tokens_after": estimate,
                "message_id": self.message.pk,
                **({"failure": failure} if failure else {}),
            },
        )
        return compacted, estimate

    def _show(self, agent: str, text: str) -> None:
        if text:
            self.log.chunk(agent=agent, content=text)
            if agent == LEAD_AGENT:
                self.shown += text

    # --- agents ------------------------------------------------------------------

    def _agent_finish(
        self, state: TurnState, frame: Frame, response: str, *, out_of_rounds: bool = False, thought: bool = False
    ) -> TurnOutcome | None:
        """`out_of_rounds`: the agent still only called tools after its last
        round; an empty response then says so, rather than "empty answer".
        `thought`: the model's reply had thinking, which the page keeps."""
        self.log.emit(RunEvent.Type.AGENT_COMPLETE, agent=frame.agent, data={"response": response})
        rounds = max_tool_rounds(frame.agent)
        if len(state.frames) == 1:
            if not response and out_of_rounds:
                raise ModelError(
                    f"The lead agent used all its {rounds} tool calls without writing an answer; "
                    "any artifacts it wrote are kept. Ask again, perhaps with a narrower question."
                )
            if not response and thought:
                # A thinking model that stopped inside its thinking (a <think> never
                # closed, or closed with nothing after it): the thinking is no answer.
                raise ModelError(
                    gettext_noop(
                        "The model thought but wrote no answer; its thinking is in the Activity. Retry asks it again."
                    )
                )
            if not response:
                raise ModelError(gettext_noop("The model returned an empty answer."))
            state.phase, state.response = Phase.COMPLETED, response
            return self._outcome(OutcomeStatus.COMPLETED, state, response=response)
        state.frames.pop()
        # Asked again this turn, the subagent remembers this activation.
        state.memories[frame.agent] = _agent_memory(frame, response=response)
        lead = state.frames[-1]
        if response:
            report = response
            output = ReportOutput(kind="report", agent=frame.agent)
        else:
            report = (
                f"(no report: {frame.agent} used all its {rounds} tool calls without writing one. "
                "Give it a narrower instruction, or go on without it.)"
                if out_of_rounds
                else "(no answer)"
            )
            output = NoReportOutput(kind="no_report", agent=frame.agent, message=report)
        result = ToolResult(
            success=bool(response),
            content=f"<subagent_result agent={quoteattr(frame.agent)}>\n{escape(report)}\n</subagent_result>",
            output=output,
        )
        # A long report is the subagent's detailed product, kept like a long tool result.
        instruction = " ".join(frame.instruction.split())
        result = self._result_spill(
            result=result, name=f"{frame.agent}_report", title=f"{frame.agent} report ({instruction[:200]})"
        )
        self._tool_report(
            state, lead, ToolCall(name=CALL_SUBAGENT, id=frame.call_id), result, called_at=frame.called_at
        )
        return None

    def _subagent_start(self, state: TurnState, frame: Frame, call: ToolCall) -> None:
        agent, instruction = call.params["agent"], call.params["instruction"].strip()
        if agent not in SUBAGENTS or not instruction:
            known = ", ".join(SUBAGENTS)
            problem = (
                f"There is no subagent '{agent}'. Available: {known}."
                if agent not in SUBAGENTS
                else "The instruction is empty."
            )
            self._tool_report(state, frame, call, tool_error(tool=call.name, message=problem))
            return
        state.frames.append(
            Frame(
                agent=agent,
                instruction=instruction,
                call_id=call.id,
                called_at=timezone.now().isoformat(),
                history=state.memories.get(agent, []),
            )
        )
        self.log.emit(RunEvent.Type.AGENT_START, agent=agent, data={"instruction": instruction, "from": frame.agent})

    # --- tools -------------------------------------------------------------------

    def _unavailable_report(self) -> None:
        """A line in Activity for each configured source the turn goes on
        without: a failed call of a tool named after it, with no tool_start, as
        a call the engine could not run is shown (docs/tools.md). Only the page,
        the trace and the event log see it; the model is not told."""
        for source in self.unavailable:
            message = f"{source.source} is unavailable, so its tools are not offered in this turn: {source.message}"
            result = tool_error(tool=source.source, message=message)
            self.log.emit(
                RunEvent.Type.TOOL_COMPLETE,
                agent=LEAD_AGENT,
                data={
                    "tool": source.source,
                    "success": False,
                    "result": result.content[:EVENT_RESULT_CHARS],
                    "truncated": len(result.content) > EVENT_RESULT_CHARS,
                    "duration_ms": 0,
                    "output": result.output,
                },
            )

    def _tool_start(self, frame: Frame, call: ToolCall) -> None:
        self.log.emit(
            RunEvent.Type.TOOL_START,
            agent=frame.agent,
            data={"tool": call.name, **_event_params(call.params, limit=EVENT_PARAM_CHARS)},
        )

    def _tool_execute(self, state: TurnState, frame: Frame, tool: Tool, call: ToolCall) -> None:
        """Runs the call; one that needed the user's approval has it by now,
        so tool_start follows permission_result (seed 004)."""
        self._tool_start(frame, call)
        state.phase = Phase.TOOL_EXECUTING
        called_at = timezone.now().isoformat()
        started = time.monotonic()
        result = tool.handler(self.tool_context, **call.params)
        duration_ms = int((time.monotonic() - started) * 1000)
        if tool.spill:
            about = ", ".join(f"{k}={v}" for k, v in call.params.items())
            # A subagent cannot read artifacts; the lead it reports to can.
            reader = "" if frame.agent == LEAD_AGENT else "Name it in your report: the lead agent can read it whole."
            result = self._result_spill(
                result=result, name=f"{tool.name}_result", title=f"{tool.name} result ({about[:200]})", reader=reader
            )
        self._tool_report(state, frame, call, result, called_at=called_at, duration_ms=duration_ms)

    def _tool_report(
        self,
        state: TurnState,
        frame: Frame,
        call: ToolCall,
        result: ToolResult,
        *,
        called_at: str = "",
        duration_ms: int | None = None,
        decision: PermissionDecision | None = None,
    ) -> None:
        """The result of `call` to its agent, to the event log and to the
        metrics: every call ends here, run, refused, invalid or delegated.
        `duration_ms` is the tool's own time; without it, the time since
        `called_at` (a subagent's whole activation)."""
        content = result.content + "".join(f"\n<note>{escape(note)}</note>" for note in frame.notes)
        notes, frame.notes = [*result.notes, *frame.notes], []
        completed_at = timezone.now()
        if duration_ms is None:
            since = datetime.fromisoformat(called_at) if called_at else completed_at
            duration_ms = int((completed_at - since).total_seconds() * 1000)
        state.tool_calls.append(
            {
                "tool_name": call.name,
                "agent": frame.agent,
                "success": result.success,
                "duration_ms": duration_ms,
                "called_at": called_at or completed_at.isoformat(),
                "completed_at": completed_at.isoformat(),
                **({"decision": decision.value} if decision else {}),
            }
        )
        self.log.emit(
            RunEvent.Type.TOOL_COMPLETE,
            agent=frame.agent,
            data={
                "tool": call.name,
                "success": result.success,
                "result": content[:EVENT_RESULT_CHARS],
                "truncated": len(content) > EVENT_RESULT_CHARS,
                "duration_ms": duration_ms,
                **({"output": result.output} if result.output is not None else {}),
                **({"notes": notes} if notes else {}),
                **result.metadata,
            },
        )
        if self._native(frame.agent):
            frame.interactions.append({"role": "tool", "tool_call_id": call.id, "content": content})
        else:
            frame.interactions.append(
                {"role": "user", "content": f"<tool_result tool={quoteattr(call.name)}>\n{content}\n</tool_result>"}
            )

    def _result_spill(self, *, result: ToolResult, name: str, title: str, reader: str = "") -> ToolResult:
        """A result too large for the context becomes an artifact of the
        session, `<name>_<n>`; the model gets a preview and the id to read it
        by (seed 001). A result that fits is returned as it is."""
        if not _too_long(result.content):
            return result
        existing = {a["artifact_id"] for a in self.artifacts.inventory()}
        number = next(n for n in range(1, len(existing) + 2) if f"{name}_{n}" not in existing)
        artifact_id = f"{name}_{number}"
        self.artifacts.create(
            artifact_id=artifact_id,
            # The title quotes the call (a long instruction, a fetched page's address): one line that fits.
            title=" ".join(title.split())[:TITLE_MAX_CHARS],
            content=result.content,
            content_type="text/xml",
            source=Artifact.Source.RUN,
        )
        preview = tokens.tokens_prefix(
            text=result.content[: settings.TOOL_RESULT_PREVIEW_CHARS], tokens=settings.TOOL_RESULT_PREVIEW_TOKENS
        )
        return ToolResult(
            success=result.success,
            content=(
                f'<stored_result artifact={quoteattr(artifact_id)} chars="{len(result.content)}">'
                f"<preview>{escape(preview)}…</preview>"
                f"<note>The whole result is too long to show here; it is stored as the artifact "
                f"{artifact_id}. {reader or 'Read it with read_artifact, in parts by line or character range, when you need more than the preview.'}</note>"
                f"</stored_result>"
            ),
            output=result.output,
            metadata={**result.metadata, "stored_as": artifact_id},
        )

    # --- permissions --------------------------------------------------------------

    def _permission_request(self, state: TurnState, frame: Frame, call: ToolCall, tool: Tool) -> TurnOutcome:
        expires_at = timezone.now() + timedelta(seconds=settings.PERMISSION_TIMEOUT)
        state.pending = PendingRequest(
            id=uuid.uuid4().hex,
            agent=frame.agent,
            tool=call.name,
            params=call.params,
            call_id=call.id,
            expires_at=expires_at.isoformat(),
            request=tool.request_shown(call.params) if tool.request_shown else {},
        )
        state.phase = Phase.WAITING_PERMISSION
        # The service logs the question with the run's pause (permission_request_data).
        return self._outcome(OutcomeStatus.WAITING_PERMISSION, state)

    def _unattended_skip(self, state: TurnState, frame: Frame, call: ToolCall) -> None:
        """A scheduled turn never waits for an approval (projects.schedules):
        the call is refused, and the answer names the tool (TurnOutcome.skipped)."""
        if call.name not in state.skipped:
            state.skipped.append(call.name)
        message = (
            f"The tool {call.name} needs the user's approval, and this turn runs on a schedule with no one there "
            "to give it, so it was not called. Do not retry it; continue without it and say what you could not do."
        )
        self._tool_report(state, frame, call, tool_error(tool=call.name, message=message))

    def _pending_resolve(self, state: TurnState) -> None:
        pending, state.pending = state.pending, None
        frame = state.frames[-1]
        decision = pending.decision
        self.log.emit(
            RunEvent.Type.PERMISSION_RESULT,
            agent=pending.agent,
            data={
                "id": pending.id,
                "tool": pending.tool,
                "decision": decision.value,
                "by": pending.decided_by,
                "decided_at": pending.decided_at,
            },
        )
        call = ToolCall(name=pending.tool, params=pending.params, id=pending.call_id)
        if decision in ALLOWING:
            if decision == PermissionDecision.ALWAYS:
                state.allowed.append(call.name)
            tool = {tool.name: tool for tool in self.configs[frame.agent].tools}.get(call.name)
            if tool is None:
                # An administrator disabled or restricted it while the user decided.
                gone = f"The tool {call.name} is no longer available; continue without it."
                self._tool_report(state, frame, call, tool_error(tool=call.name, message=gone), decision=decision)
                return
            if tool.request_shown and tool.request_shown(call.params) != pending.request:
                # An administrator changed it while the user decided: they approved another request.
                changed = (
                    f"The tool {call.name} was changed while the call waited for approval, so it would no longer "
                    "send the request the user approved; it was not called. Call it again if it is still needed."
                )
                self._tool_report(state, frame, call, tool_error(tool=call.name, message=changed), decision=decision)
                return
            self._tool_execute(state, frame, tool, call)
            return
        why = REFUSED_MESSAGES[decision]
        unshowable = permission_unshowable(pending.params)
        if unshowable:
            why += f" It could not be approved: {unshowable}; a call with shorter parameters can be."
        message = f"{why} Do not retry it; continue without it or explain what you could not do."
        self._tool_report(state, frame, call, tool_error(tool=call.name, message=message), decision=decision)

    # --- the end ------------------------------------------------------------------

    def _outcome(self, status: OutcomeStatus, state: TurnState, *, response: str = "") -> TurnOutcome:
        waiting = status == OutcomeStatus.WAITING_PERMISSION
        return TurnOutcome(
            status=status,
            response=response,
            metrics=turn_metrics(state),
            pending=state.pending if waiting else None,
            skipped=tuple(state.skipped),
        )


def agent_configs(*, user, unavailable: list[Unavailable] | None = None) -> dict[str, AgentConfig]:
    """Every agent as it works in `user`'s conversations: its built-in tools,
    then the configured tools (agents.tools.registry) it may use there; the
    sources that could not be reached are added to `unavailable`."""
    builtin = {tool.name for config in AGENTS.values() for tool in config.tools}
    configured = configured_tools(user=user, taken=builtin, unavailable=unavailable)
    return {
        name: dataclasses.replace(config, tools=(*config.tools, *configured.get(name, ())))
        for name, config in AGENTS.items()
    }


def _too_long(text: str) -> bool:
    """Too long to go into the context whole, in characters or in estimated tokens."""
    return (
        len(text) > settings.TOOL_RESULT_MAX_CHARS
        or tokens.tokens_estimate(text=text) > settings.TOOL_RESULT_MAX_TOKENS
    )


def _event_params(params: dict, *, limit: int) -> dict:
    """A tool call's params for the event log: a string longer than `limit`
    is cut to its start, and `params_truncated` gives its full length by name."""
    long = {name: len(value) for name, value in params.items() if isinstance(value, str) and len(value) > limit}
    kept = {name: value[:limit] if name in long else value for name, value in params.items()}
    return {"params": kept, "params_truncated": long} if long else {"params": kept}


def _needs_permission(tool: Tool, state: TurnState) -> bool:
    permission = settings.TOOL_PERMISSIONS.get(tool.name, tool.permission)
    return permission == CONFIRM and tool.name not in state.allowed


def _agent_memory(frame: Frame, *, response: str) -> list[dict]:
    """A subagent's activation as it will see it when it is called again:
    what it was told, what it did and what it reported, after what it
    remembered already."""
    seen = context.agent_messages(
        system="",
        message=None,
        history=frame.history,
        instruction=frame.instruction,
        summary=frame.summary,
        interactions=frame.interactions,
    )
    return [*seen[1:], {"role": "assistant", "content": response or "(no report)"}]


def _usage_counted(usage: dict | None, *, reasoning: str = "") -> dict | None:
    """The token counts of a call's usage, as its metrics record keeps them:
    its thinking as the service counted it, else as estimated from the
    thinking it streamed (a service that passes inline <think> text on, or
    streams reasoning_content, often reports no details)."""
    if not usage:
        return None
    counted = {key: usage.get(key) or 0 for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
    thought = usage.get("reasoning_tokens") or (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    thought = thought or (tokens.tokens_estimate(text=reasoning) if reasoning else 0)
    if thought:
        counted["reasoning_tokens"] = thought
    # Billed at their own price (the usage page's estimated cost).
    if cached := (usage.get("prompt_tokens_details") or {}).get("cached_tokens"):
        counted["cached_tokens"] = cached
    return counted


def turn_metrics(state: TurnState) -> dict:
    """The turn's metrics (seed 004 ExecutionMetrics) as of now: a turn that
    fails is measured up to where it stopped."""
    completed_at = timezone.now()
    started_at = datetime.fromisoformat(state.started_at)
    return {
        "started_at": state.started_at,
        "completed_at": completed_at.isoformat(),
        "total_duration_ms": int((completed_at - started_at).total_seconds() * 1000),
        "agent_executions": state.agent_executions,
        "tool_calls": state.tool_calls,
    }


def turn_state_new(*, message, allowed: list[str]) -> TurnState:
    return TurnState(
        frames=[Frame(agent=LEAD_AGENT, instruction=message.content)],
        allowed=list(allowed),
        started_at=timezone.now().isoformat(),
    )


def turn_execute(
    *,
    run,
    models: AgentModels,
    log: RunEventLog,
    artifacts: ArtifactManager,
    state: TurnState,
    is_cancelled: Callable[[], bool] = lambda: False,
    checkpoint: Callable[[TurnState], None] = lambda state: None,
) -> TurnOutcome:
    """Run the turn from `state` until it completes, waits for the user's
    permission or is cancelled; `checkpoint` is called after every step."""
    turn = Turn(run=run, models=models, log=log, artifacts=artifacts, is_cancelled=is_cancelled, checkpoint=checkpoint)
    return turn.execute(state)
