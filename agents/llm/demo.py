"""The offline demo model: with no API key configured it plays every agent of
a research turn, so a fresh install shows the whole flow with no network.

It reads the conversation like a model would — the tools it was offered say
which agent it is, the tool results so far say how far the turn has got, the
lead's artifact inventory says what earlier turns left — and answers with the
XML tool calls of seed 003:

    lead:   task_plan → search_agent → tick → crawl_agent → tick → report → tick → answer
            (a follow-up reads the report, then adds its section with update_artifact)
    search: web_search(the question) → the hits as a list, or that there are none
    crawl:  web_fetch(each hit, through the permission prompt) → what each page says, or why it was not read

A follow-up in the same conversation rewrites the plan it finds and adds a
section to the end of the report, so the report keeps every earlier question's
section and whatever a person wrote in it. A search that finds nothing ends the
research there, and the plan says so. The lead's answer is made from the
tool results alone, so it claims no read, write or find that did not happen.
"""

import html
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..toolcalls import toolcalls_parse
from ..tools.base import Tool
from .base import XML, Delta

PLAN_ID = "task_plan"
REPORT_ID = "research_report"
REPORT_TITLE = "Research report"
SEARCH_STEP, READ_STEP, REPORT_STEP = "Search the team library", "Read the best sources", "Write the report"
MAX_SOURCES = 2
EXCERPT_CHARS = 1200
# A follow-up appends to the report after its last lines, read from its end.
ANCHOR_LINES, TAIL_CHARS = 3, 2000

_RESULT = re.compile(r"<tool_result tool=\"([^\"]+)\">\n(.*?)\n</tool_result>", re.DOTALL)
_HIT = re.compile(r"<result>\s*<title>(.*?)</title>\s*<url>(.*?)</url>\s*<snippet>(.*?)</snippet>", re.DOTALL)
_URL = re.compile(r"(?:library|https?)://[^\s<>)\]]+")
_PAGE = re.compile(r"<page\b[^>]*?title=\"([^\"]*)\"[^>]*>\s*<content>(.*?)</content>", re.DOTALL)
_SEARCHED = re.compile(r"<search_results provider=\"([^\"]*)\"")
# The lines of the search agent's report and the lead's inventory this module writes or reads.
_SOURCE_LINE = re.compile(r"^- \[(.+?)\]\(((?:library|https?)://\S+?)\)", re.MULTILINE)
_INVENTORY_LINE = re.compile(r"^- `([^`]+)` — (.*) \([^()]*, version \d+, from \w+\): ", re.MULTILINE)
_ARTIFACT_TOOLS = {
    "create_artifact": "create",
    "rewrite_artifact": "rewrite",
    "update_artifact": "update",
    "read_artifact": "read",
}
_DONE = {"create": "Created", "rewrite": "Rewrote", "update": "Updated"}


@dataclass
class _Exchange:
    """One tool call of this activation and what came back."""

    tool: str
    params: dict
    ok: bool
    content: str


def _call(tool: str, **params) -> str:
    body = "".join(f"<{key}><![CDATA[{value}]]></{key}>" for key, value in params.items())
    return f"\n<tool_call><name>{tool}</name><params>{body}</params></tool_call>"


def _exchanges(messages: list[dict], tools: list) -> list[_Exchange]:
    """This activation's tool calls with their results, oldest first."""
    schemas = {tool.name: tool.parameters for tool in tools}
    found, params = [], {}
    for message in messages:
        content = message["content"] or ""
        if message["role"] == "assistant":
            calls = toolcalls_parse(content, schemas=schemas)
            params = calls[0].params if calls else {}
            continue
        match = _RESULT.fullmatch(content) if message["role"] == "user" else None
        if match:
            result = match.group(2)
            found.append(
                _Exchange(tool=match.group(1), params=params, ok=not result.startswith("<error"), content=result)
            )
            params = {}
    return found


def _request(messages: list[dict]) -> str:
    """The newest message that is the user's (or the lead's) words, not a tool result."""
    for message in reversed(messages):
        if message["role"] == "user" and not (message["content"] or "").startswith(
            ("<tool_result", "<context_summary")
        ):
            return message["content"]
    return ""


def _text(content: str) -> str:
    """A tool result as the words it says, markup gone."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", content)).split())


def _first_sentence(text: str) -> str:
    # An error goes on to tell the model what to do next; the user needs only what happened.
    return re.split(r"(?<=\.)\s", text, maxsplit=1)[0]


class DemoChatModel:
    name = "demo"
    demo = True
    tool_mode = XML
    context_window = 1_000_000

    def __init__(self, *, word_delay: float):
        self.word_delay = word_delay

    def stream(self, messages: list[dict], *, tools: Iterable[Tool] = ()) -> Iterator[Delta]:
        tools = list(tools)
        names = {tool.name for tool in tools}
        if "call_subagent" in names:
            reply = self._lead(messages, tools)
        elif "web_search" in names:
            reply = self._search(messages, tools)
        elif "web_fetch" in names:
            reply = self._crawl(messages, tools)
        else:
            reply = "This is the offline demo model; it has nothing to add."
        prose, _, call = reply.partition("\n<tool_call>")
        words = prose.split(" ")
        for i, word in enumerate(words):
            time.sleep(self.word_delay)
            yield Delta(content=word if i == 0 else " " + word)
        if call:
            yield Delta(content="\n<tool_call>" + call)
        yield Delta(usage={"prompt_tokens": 0, "completion_tokens": len(words), "total_tokens": len(words)})

    # --- the agents -------------------------------------------------------------

    def _lead(self, messages: list[dict], tools: list) -> str:
        question = " ".join(_request(messages).split())
        done = _exchanges(messages, tools)
        # The system prompt's inventory: what this conversation's earlier turns left.
        existing = dict(_INVENTORY_LINE.findall(messages[0]["content"]))
        steps = [lambda: _plan_write(question, existing=existing)]
        steps.append(
            lambda: "Searching the team library." + _call("call_subagent", agent="search_agent", instruction=question)
        )
        if len(done) >= len(steps):
            hits = _source_lines(done[1])
            if not hits:
                steps.append(lambda: _plan_nothing_found(question, search=_subagent_text(done[1])))
            else:
                urls = [url for _, url in hits[:MAX_SOURCES]]
                steps += [
                    lambda: _tick(SEARCH_STEP),
                    lambda: (
                        "Reading the best sources."
                        + _call(
                            "call_subagent",
                            agent="crawl_agent",
                            instruction=f"Read these sources and report what they say about: {question}\n"
                            + "\n".join(urls),
                        )
                    ),
                    lambda: _tick(READ_STEP),
                ]
                # The inventory lists this turn's working copies too: a report created this turn is not a follow-up's.
                created = any(e.tool == "create_artifact" and e.params.get("id") == REPORT_ID for e in done)
                if REPORT_ID in existing and not created:
                    steps += _report_add_steps(question, done=done, at=len(steps))
                else:
                    steps += [lambda: _report_create(question, crawl=done[3]), lambda: _tick(REPORT_STEP)]
        if len(done) < len(steps):
            return steps[len(done)]()
        return _answer(done, existing=existing)

    def _search(self, messages: list[dict], tools: list) -> str:
        query = _request(messages)[:200]
        done = _exchanges(messages, tools)
        if not done:
            return "Searching." + _call("web_search", query=query)
        result = done[-1]
        if not result.ok:
            return f"The search failed: {_first_sentence(_text(result.content))}"
        hits = _HIT.findall(result.content)
        if not hits:
            shown = " ".join(query.split())
            provider = _SEARCHED.search(result.content)
            if provider and provider.group(1) == "local":
                return f"The team library has nothing on “{shown}”: no document in it matches."
            return f"The search found nothing for “{shown}”."
        # One line per hit, so the lead finds each hit by its line.
        lines = [
            f"- [{html.unescape(t)}]({html.unescape(u)}): {' '.join(html.unescape(s).split())}" for t, u, s in hits
        ]
        return "Sources found:\n\n" + "\n".join(lines)

    def _crawl(self, messages: list[dict], tools: list) -> str:
        urls = _URL.findall(_request(messages))[:MAX_SOURCES]
        done = _exchanges(messages, tools)
        if len(done) < len(urls):
            return f"Reading {urls[len(done)]}." + _call("web_fetch", url=urls[len(done)])
        parts = []
        for url, result in zip(urls, done, strict=False):
            page = _PAGE.search(result.content)
            if page is None:
                parts.append(f"### {url}\n\nCould not read it: {_first_sentence(_text(result.content))}")
                continue
            text = html.unescape(page.group(2)).strip()
            excerpt = text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")
            parts.append(f"### {html.unescape(page.group(1)) or url}\n\nSource: {url}\n\n{excerpt}")
        return "\n\n".join(parts) or "There was nothing to read."


# --- the lead's steps -------------------------------------------------------------


def _plan(question: str) -> str:
    return f"Question: {question[:200]}\n\n" + "\n".join(
        f"- [ ] {step}" for step in (SEARCH_STEP, READ_STEP, REPORT_STEP)
    )


def _plan_write(question: str, *, existing: dict) -> str:
    if PLAN_ID in existing:
        return "This conversation has a task plan; I'll rewrite it for this question." + _call(
            "rewrite_artifact", id=PLAN_ID, content=_plan(question)
        )
    return "I'll plan the research first." + _call(
        "create_artifact", id=PLAN_ID, title="Task plan", content=_plan(question)
    )


def _plan_nothing_found(question: str, *, search: str) -> str:
    # Struck out rather than left open: an open step reads as work still to come.
    plan = (
        f"Question: {question[:200]}\n\n- [x] {SEARCH_STEP}: {search}\n"
        f"- ~~{READ_STEP}~~: nothing to read\n- ~~{REPORT_STEP}~~: nothing to report"
    )
    return "The search found nothing, so the plan ends here." + _call("rewrite_artifact", id=PLAN_ID, content=plan)


def _tick(step: str) -> str:
    return f"Done: {step.lower()}." + _call(
        "update_artifact", id=PLAN_ID, old_str=f"- [ ] {step}", new_str=f"- [x] {step}"
    )


def _report_section(crawl: _Exchange) -> str:
    return _subagent_text(crawl) or "No source could be read, so there is nothing to report."


def _report_create(question: str, *, crawl: _Exchange) -> str:
    report = (
        f"# {question[:200]}\n\n"
        "*Written by the offline demo model from the team library; "
        "it quotes its sources rather than analysing them.*\n\n"
        f"## What the sources say\n\n{_report_section(crawl)}\n"
    )
    return "Writing the report." + _call("create_artifact", id=REPORT_ID, title=REPORT_TITLE, content=report)


def _report_add_steps(question: str, *, done: list[_Exchange], at: int) -> list:
    """A follow-up adds a section at the end of the report, as the lead's
    prompt asks: the earlier sections and whatever a person wrote there stay.
    It reads the report first, and its end too when one read is not all of it.
    A report it cannot read stays as it was, and the plan's last step open."""
    steps = [lambda: "Reading the report to add to it." + _call("read_artifact", id=REPORT_ID)]
    if len(done) > at:
        if not done[at].ok:
            return steps
        tail = _tail_offset(done[at])
        if tail is not None:
            steps.append(lambda: "Reading the end of the report." + _call("read_artifact", id=REPORT_ID, offset=tail))
    read_at = at + len(steps) - 1
    steps += [lambda: _report_add(question, crawl=done[3], read=done[read_at]), lambda: _tick(REPORT_STEP)]
    return steps


def _read_text(exchange: _Exchange) -> str:
    content = re.search(r"<content>(.*)</content>", exchange.content, re.DOTALL)
    return html.unescape(content.group(1)) if content else ""


def _tail_offset(exchange: _Exchange) -> int | None:
    """Where to read the end of an artifact one read did not return whole."""
    part = re.match(r'<artifact [^>]*\bchars="(\d+)-(\d+)" of="(\d+)"', exchange.content)
    if not exchange.ok or part is None or int(part.group(2)) >= int(part.group(3)):
        return None
    return max(0, int(part.group(3)) - TAIL_CHARS)


def _report_add(question: str, *, crawl: _Exchange, read: _Exchange) -> str:
    section = f"## {question[:200]}\n\n{_report_section(crawl)}"
    text = _read_text(read).rstrip()
    if not text:
        return "The report is empty; writing it for this question." + _call(
            "rewrite_artifact", id=REPORT_ID, content=section + "\n"
        )
    # Its last lines, as many as it takes for one place in it to hold them, are where the section goes.
    lines = text.splitlines()
    count = ANCHOR_LINES
    while count < len(lines) and text.count("\n".join(lines[-count:])) > 1:
        count += 1
    anchor = "\n".join(lines[-count:])
    return "Adding a section to the report." + _call(
        "update_artifact", id=REPORT_ID, old_str=anchor, new_str=f"{anchor}\n\n{section}"
    )


# --- the lead's answer ------------------------------------------------------------


def _subagent_text(exchange: _Exchange) -> str:
    return html.unescape(re.sub(r"</?subagent_result[^>]*>", "", exchange.content)).strip()


def _source_lines(exchange: _Exchange) -> list[tuple[str, str]]:
    """The (title, url) of each source the search agent listed."""
    return _SOURCE_LINE.findall(_subagent_text(exchange)) if exchange.ok else []


def _answer(done: list[_Exchange], *, existing: dict) -> str:
    lines = _research_lines(done, existing=existing) + _artifact_lines(done, existing=existing)
    return (
        "This is the offline demo model: it quotes the team library rather than researching. "
        "What happened in this turn:\n\n" + "\n".join(lines) + "\n\n"
        "Set `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for a self-hosted server) to have a real model answer."
    )


def _research_lines(done: list[_Exchange], *, existing: dict) -> list[str]:
    subagents = {exchange.params.get("agent"): exchange for exchange in done if exchange.tool == "call_subagent"}
    search, crawl = subagents.get("search_agent"), subagents.get("crawl_agent")
    hits = _source_lines(search) if search else []
    if not hits:
        said = _subagent_text(search) if search else "The search did not run."
        kept = f" `{REPORT_ID}` still holds the earlier report." if REPORT_ID in existing else ""
        return [f"- {said} So there was nothing to read, and no report was written.{kept}"]
    titles = {url: title for title, url in hits}
    lines = [f"- The search found {len(hits)} source{'s' if len(hits) > 1 else ''}."]
    report = _subagent_text(crawl) if crawl else ""
    urls = [url for _, url in hits[:MAX_SOURCES]]
    read = [url for url in urls if f"\n\nSource: {url}\n\n" in f"\n\n{report}\n\n"]
    lines.append("- Read: " + ", ".join(f"[{titles[url]}]({url})" for url in read) + "." if read else "- Read nothing.")
    for url in urls:
        reason = re.search(rf"^### {re.escape(url)}\n\nCould not read it: (.*)$", report, re.MULTILINE)
        if reason:
            lines.append(f"- Not read: [{titles[url]}]({url}): {reason.group(1)}")
    return lines


def _artifact_lines(done: list[_Exchange], *, existing: dict) -> list[str]:
    """Each artifact written, by how it was first written and its last
    version; then each artifact call that failed."""
    written, failed = {}, []
    for exchange in done:
        verb = _ARTIFACT_TOOLS.get(exchange.tool)
        if verb is None:
            continue
        artifact_id = exchange.params.get("id", "")
        if not exchange.ok:
            message = re.search(r"<message>(.*?)</message>", exchange.content, re.DOTALL)
            said = html.unescape(message.group(1)) if message else _text(exchange.content)
            failed.append(f"- Could not {verb} `{artifact_id}`: {said}")
            continue
        if verb == "read":
            continue
        title = exchange.params.get("title") or existing.get(artifact_id)
        named = f"`{artifact_id}` ({title})" if title else f"`{artifact_id}`"
        first = written.setdefault(artifact_id, {"verb": verb, "named": named})
        first["version"] = re.search(r'<artifact version="(\d+)"', exchange.content).group(1)
    lines = [f"- {_DONE[w['verb']]} {w['named']}, now at version {w['version']}." for w in written.values()]
    return lines + failed
