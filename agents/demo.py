"""The offline demo model: with no API key configured it plays every agent of
a research turn, so a fresh install shows the whole flow with no network.

It reads the conversation like a model would — the tools it was offered say
which agent it is, the tool results so far say how far the turn has got — and
answers with the XML tool calls of seed 003:

    lead:   task_plan → search_agent → tick → crawl_agent → tick → report → tick → answer
    search: web_search(the question) → the hits as a list
    crawl:  web_fetch(each hit, through the permission prompt) → what each page says
"""

import html
import re
import time
from collections.abc import Iterable, Iterator

from .llm import XML, Delta

PLAN = "- [ ] Search the team library\n- [ ] Read the best sources\n- [ ] Write the report"
REPORT_ID = "research_report"
MAX_SOURCES = 2
EXCERPT_CHARS = 1200

_RESULT = re.compile(r"<tool_result tool=\"([^\"]+)\">\n(.*?)\n</tool_result>", re.DOTALL)
_HIT = re.compile(r"<result>\s*<title>(.*?)</title>\s*<url>(.*?)</url>\s*<snippet>(.*?)</snippet>", re.DOTALL)
_URL = re.compile(r"(?:library|https?)://[^\s<>)\]]+")
_PAGE = re.compile(r"<page\b[^>]*?title=\"([^\"]*)\"[^>]*>\s*<content>(.*?)</content>", re.DOTALL)


def _call(tool: str, **params) -> str:
    body = "".join(f"<{key}><![CDATA[{value}]]></{key}>" for key, value in params.items())
    return f"\n<tool_call><name>{tool}</name><params>{body}</params></tool_call>"


def _results(messages: list[dict]) -> list[tuple[str, str]]:
    """This activation's tool results, oldest first: (tool, content)."""
    found = []
    for message in messages:
        match = _RESULT.fullmatch(message["content"] or "") if message["role"] == "user" else None
        if match:
            found.append((match.group(1), match.group(2)))
    return found


def _request(messages: list[dict]) -> str:
    """The newest message that is the user's (or the lead's) words, not a tool result."""
    for message in reversed(messages):
        if message["role"] == "user" and not (message["content"] or "").startswith(("<tool_result", "<context_summary")):
            return message["content"]
    return ""


class DemoChatModel:
    name = "demo"
    demo = True
    tool_mode = XML
    context_window = 1_000_000

    def __init__(self, *, word_delay: float):
        self.word_delay = word_delay

    def stream(self, messages: list[dict], *, tools: Iterable = ()) -> Iterator[Delta]:
        names = {tool.name for tool in tools}
        if "call_subagent" in names:
            reply = self._lead(messages)
        elif "web_search" in names:
            reply = self._search(messages)
        elif "web_fetch" in names:
            reply = self._crawl(messages)
        else:
            reply = "This is the offline demo model; it has nothing to add."
        prose, call = (reply.split("\n<tool_call>", 1) + [""])[:2]
        words = prose.split(" ")
        for i, word in enumerate(words):
            time.sleep(self.word_delay)
            yield Delta(content=word if i == 0 else " " + word)
        if call:
            yield Delta(content="\n<tool_call>" + call)
        yield Delta(usage={"prompt_tokens": 0, "completion_tokens": len(words), "total_tokens": len(words)})

    # --- the agents -------------------------------------------------------------

    def _lead(self, messages: list[dict]) -> str:
        question = " ".join(_request(messages).split())
        results = _results(messages)
        found = [content for tool, content in results if tool == "call_subagent"]
        sources = _URL.findall(html.unescape(found[0]))[:MAX_SOURCES] if found else []
        steps = [
            lambda: "I'll plan the research first." + _call("create_artifact", id="task_plan", title="Task plan", content=PLAN),
            lambda: "Searching the team library." + _call("call_subagent", agent="search_agent", instruction=question),
            lambda: _tick("Search the team library"),
        ]
        if sources:
            steps.append(
                lambda: "Reading the best sources."
                + _call(
                    "call_subagent",
                    agent="crawl_agent",
                    instruction=f"Read these sources and report what they say about: {question}\n" + "\n".join(sources),
                )
            )
        steps += [
            lambda: _tick("Read the best sources"),
            lambda: "Writing the report."
            + _call("create_artifact", id=REPORT_ID, title=f"Report: {question[:80]}", content=_report(question, found)),
            lambda: _tick("Write the report"),
        ]
        if len(results) < len(steps):
            return steps[len(results)]()
        return (
            "**This is the offline demo model**, so the research is a demonstration: "
            f"it searched the team library for your question, read {len(sources)} source(s) and "
            f"wrote what they say into the artifact `{REPORT_ID}`; the checklist in `task_plan` "
            "shows each step.\n\nSet `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for a self-hosted, "
            "OpenAI-compatible server) to have a real model do this work."
        )

    def _search(self, messages: list[dict]) -> str:
        results = _results(messages)
        if not results:
            return "Searching." + _call("web_search", query=_request(messages)[:200])
        hits = _HIT.findall(results[-1][1])
        if not hits:
            return "The search found nothing relevant."
        lines = [f"- [{html.unescape(t)}]({html.unescape(u)}): {html.unescape(s)}" for t, u, s in hits]
        return "Sources found:\n\n" + "\n".join(lines)

    def _crawl(self, messages: list[dict]) -> str:
        urls = _URL.findall(_request(messages))[:MAX_SOURCES]
        results = _results(messages)
        if len(results) < len(urls):
            return f"Reading {urls[len(results)]}." + _call("web_fetch", url=urls[len(results)])
        parts = []
        for url, (_, content) in zip(urls, results, strict=False):
            page = _PAGE.search(content)
            if page is None:
                reason = re.sub(r"<[^>]+>", " ", html.unescape(content))
                parts.append(f"### {url}\n\nCould not read it: {' '.join(reason.split())[:300]}")
                continue
            text = html.unescape(page.group(2)).strip()
            excerpt = text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")
            parts.append(f"### {html.unescape(page.group(1)) or url}\n\nSource: {url}\n\n{excerpt}")
        return "\n\n".join(parts) or "There was nothing to read."


def _tick(step: str) -> str:
    return f"Done: {step.lower()}." + _call("update_artifact", id="task_plan", old_str=f"- [ ] {step}", new_str=f"- [x] {step}")


def _report(question: str, subagent_results: list[str]) -> str:
    read = html.unescape(re.sub(r"</?subagent_result[^>]*>", "", subagent_results[-1])).strip() if len(subagent_results) > 1 else ""
    body = read or "No source could be read, so there is nothing to report."
    return (
        f"# {question[:200]}\n\n"
        "*Written by the offline demo model from the team library; it quotes its sources rather than analysing them.*\n\n"
        f"## What the sources say\n\n{body}\n"
    )
