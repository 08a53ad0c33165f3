"""The agents of a turn (seed 003). A new agent is an entry here and a prompt
in `agents/prompts/<name>.md`; the engine needs no change."""

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .tools.artifacts import ARTIFACT_TOOLS
from .tools.base import Tool
from .tools.search import WEB_SEARCH_TOOL
from .tools.web import WEB_FETCH_TOOL

LEAD_AGENT = "lead_agent"
CALL_SUBAGENT = "call_subagent"


@dataclass(frozen=True)
class AgentConfig:
    name: str
    description: str
    tools: tuple[Tool, ...]
    # Tool calls the agent may make in one activation; then it must answer.
    # settings.MAX_TOOL_ROUNDS overrides it (max_tool_rounds below).
    max_tool_rounds: int
    # Subagents see only the instruction they were given, not the conversation.
    sees_history: bool = False


CALL_SUBAGENT_TOOL = Tool(
    name=CALL_SUBAGENT,
    description="Delegate a focused task to a subagent and wait for its report.",
    parameters={
        "type": "object",
        "properties": {
            "agent": {"type": "string", "description": "The subagent's name, from the list of available subagents"},
            "instruction": {"type": "string", "description": "What to do, with all the context it needs"},
        },
        "required": ["agent", "instruction"],
    },
    # The engine routes this call itself: it starts the subagent's steps.
    handler=None,
)

SUBAGENTS = {
    config.name: config
    for config in (
        AgentConfig(
            name="search_agent",
            description="Finds sources: searches the web (or the team library) and reports titles, URLs and what each says.",
            tools=(WEB_SEARCH_TOOL,),
            max_tool_rounds=3,
        ),
        AgentConfig(
            name="crawl_agent",
            description="Reads given URLs (web pages, PDFs, library documents) and reports their relevant content.",
            tools=(WEB_FETCH_TOOL,),
            max_tool_rounds=2,
        ),
    )
}

LEAD = AgentConfig(
    name=LEAD_AGENT,
    description="Plans the work, delegates, and writes the answer and its artifacts.",
    tools=(*ARTIFACT_TOOLS, CALL_SUBAGENT_TOOL),
    max_tool_rounds=100,
    sees_history=True,
)

AGENTS = {LEAD_AGENT: LEAD, **SUBAGENTS}


def max_tool_rounds(agent: str) -> int:
    """The agent's tool calls per activation, as the environment sets them or else its default."""
    # Checked here, not in the settings, which load before the agents exist; a
    # misspelt name would otherwise leave the agent it meant at its default unnoticed.
    if unknown := sorted(settings.MAX_TOOL_ROUNDS.keys() - AGENTS.keys()):
        raise ImproperlyConfigured(
            f"ARTIFACTFLOW_MAX_TOOL_ROUNDS names an agent that does not exist: {', '.join(unknown)}. "
            f"The agents are {', '.join(AGENTS)}."
        )
    return settings.MAX_TOOL_ROUNDS.get(agent, AGENTS[agent].max_tool_rounds)


def subagents_describe() -> str:
    lines = ["# Available subagents", ""]
    lines += [f"- `{config.name}`: {config.description}" for config in SUBAGENTS.values()]
    return "\n".join(lines)
