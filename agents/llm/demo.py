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

A question written in Chinese gets its plan, report, answer and each agent's
words in Chinese (the phrase table _CHINESE), as the prompts ask a real model;
the tool names, parameters and artifact ids stay as they are.
"""

import html
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..state import REFUSED_MESSAGES, PermissionDecision
from ..toolcalls import toolcalls_parse
from ..tools.base import Tool
from .base import TITLE_MAX_CHARS, TITLE_PROMPT, XML, Delta

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
_DONE = {
    "create": "Created {named}, now at version {version}.",
    "rewrite": "Rewrote {named}, now at version {version}.",
    "update": "Updated {named}, now at version {version}.",
}

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAN_CHARACTER = re.compile(f"[{_HAN}]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# A word, or a single Han character, with the spaces before it: the pieces the
# answer streams in, since Chinese has no spaces between its words.
_PIECE = re.compile(rf"\s*(?:[{_HAN}]|[^\s{_HAN}]+)|\s+")


_TITLE_STOP_WORDS = frozenset(
    "a an the of to in on for and or but is are was were be been do does did how what why when where which who "
    "can could should would will shall may might i you we they it its this that these those with about from by as "
    "at me my our your their please tell explain describe give show summarise summarize there any some say says "
    "key points".split()
)
# Asking words and particles: a title names the subject, not the asking.
_CHINESE_FILLER = re.compile("请问|请|帮我|能否|可以|如何|怎么样|怎样|怎么|什么|为什么|是否|哪些|哪个|一下|吗|呢|吧")
_CLAUSE_END = re.compile(r"[。！？!?；;，,\n]")


def demo_title(question: str) -> str:
    """A title from the question's key words, as a model would propose one:
    its words less the asking ones, or a Chinese question's first clause less
    its question words."""
    question = " ".join(question.split())
    if written_in_chinese(question):
        clauses = [c.strip(" ：:、") for c in _CLAUSE_END.split(_CHINESE_FILLER.sub("", question))]
        title = next((c for c in clauses if c), "").rstrip("是的了")[:20]
    else:
        words = [w for w in re.findall(r"[\w][\w'-]*", question) if w.lower() not in _TITLE_STOP_WORDS][:6]
        title = " ".join(words)
        title = title[:1].upper() + title[1:]
    return title[:TITLE_MAX_CHARS] or question[:TITLE_MAX_CHARS]


def written_in_chinese(text: str) -> bool:
    """Whether the text is Chinese: its Han characters outnumber its words in
    Latin letters. Words, not letters, because a Chinese question often names
    its subject in Latin letters ("SQLite 的 WAL 模式", "COP"), and a Han
    character is about a syllable."""
    return len(_HAN_CHARACTER.findall(text)) > len(_LATIN_WORD.findall(text))


# Every phrase the demo writes, as the code writes it in English, and in Chinese.
_CHINESE = {
    # The lead's plan, its steps and what it says as it goes.
    "Task plan": "任务计划",
    "Question: {question}": "问题：{question}",
    SEARCH_STEP: "检索团队资料库",
    READ_STEP: "阅读最相关的资料",
    REPORT_STEP: "撰写报告",
    "I'll plan the research first.": "我先制定研究计划。",
    "This conversation has a task plan; I'll rewrite it for this question.": "这个对话已有任务计划，我按这个问题重写它。",
    "Searching the team library.": "正在检索团队资料库。",
    "Reading the best sources.": "正在阅读最相关的资料。",
    "Read these sources and report what they say about: {question}": "请阅读以下资料，报告其中与这个问题有关的内容：{question}",
    "Done: {step}.": "已完成：{step}。",
    "The search found nothing, so the plan ends here.": "检索没有找到任何资料，计划到此为止。",
    "{step}: {note}": "{step}：{note}",
    "nothing to read": "没有可读的资料",
    "nothing to report": "没有可写的内容",
    # The report.
    "Research report": "研究报告",
    "*Written by the offline demo model from the team library; it quotes its sources rather than analysing them.*": (
        "*本报告由离线演示模型根据团队资料库撰写：它摘录资料原文，不做分析。*"
    ),
    "What the sources say": "资料中的相关内容",
    "No source could be read, so there is nothing to report.": "没有读到任何资料，因此没有可报告的内容。",
    "Writing the report.": "正在撰写报告。",
    "Reading the report to add to it.": "先读一遍报告，再往里补充。",
    "Reading the end of the report.": "正在读取报告的结尾。",
    "The report is empty; writing it for this question.": "报告是空的，我按这个问题重新撰写。",
    "Adding a section to the report.": "正在给报告添加一节。",
    # The lead's answer.
    "This is the offline demo model: it quotes the team library rather than researching. What happened in this turn:": (
        "这是离线演示模型：它只摘录团队资料库的原文，并不真正做研究。本轮做了这些事："
    ),
    "Set `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for a self-hosted server) to have a real model answer.": (
        "设置 `OPENAI_API_KEY`（自建的模型服务还需设置 `OPENAI_BASE_URL`），即可由真正的模型回答。"
    ),
    "The search did not run.": "检索没有运行。",
    "{said} So there was nothing to read, and no report was written.{kept}": "{said}因此没有可读的资料，也没有撰写报告。{kept}",
    " `{id}` still holds the earlier report.": "`{id}` 仍保留着之前的报告。",
    "The search found {count} source{plural}.": "检索找到了 {count} 份资料。",
    "Read: {sources}.": "已阅读：{sources}。",
    ", ": "、",
    "Read nothing.": "没有阅读任何资料。",
    "Not read: [{title}]({url}): {reason}": "未阅读：[{title}]({url})：{reason}",
    "Could not {verb} `{id}`: {said}": "无法{verb} `{id}`：{said}",
    "`{id}` ({title})": "`{id}`（{title}）",
    "read": "读取",
    "create": "创建",
    "rewrite": "重写",
    "update": "更新",
    _DONE["create"]: "已创建 {named}，当前为第 {version} 版。",
    _DONE["rewrite"]: "已重写 {named}，当前为第 {version} 版。",
    _DONE["update"]: "已更新 {named}，当前为第 {version} 版。",
    # The search agent.
    "Searching.": "正在检索。",
    "The search failed: {reason}": "检索失败：{reason}",
    "The team library has nothing on “{query}”: no document in it matches.": "团队资料库中没有关于“{query}”的内容：没有文档与之匹配。",
    "The search found nothing for “{query}”.": "检索没有找到关于“{query}”的任何结果。",
    "Sources found:": "找到的资料：",
    # The crawl agent.
    "Reading {url}.": "正在阅读 {url}。",
    "Could not read it: {reason}": "无法读取：{reason}",
    "Source: {url}": "来源：{url}",
    "There was nothing to read.": "没有可读的内容。",
    # An agent with no tools, such as the compaction.
    "This is the offline demo model; it has nothing to add.": "这是离线演示模型，没有什么可补充的。",
}
# The engine's refusals (agents.state), passed on to the person in their language.
_CHINESE_REFUSALS = {
    REFUSED_MESSAGES[PermissionDecision.DENY]: "你拒绝了这次读取。",
    REFUSED_MESSAGES[PermissionDecision.EXPIRED]: "请求无人及时回应，按拒绝处理。",
}


@dataclass(frozen=True)
class _Say:
    """The demo's phrases in one language: say("Reading {url}.", url=url)."""

    table: dict = field(default_factory=dict)

    def __call__(self, phrase: str, **values) -> str:
        return self._template(phrase).format(**values)

    def pattern(self, phrase: str) -> str:
        """A regex the phrase matches whatever its values, each value a group: to read back what an agent said."""
        parts = re.split(r"\{\w+\}", self._template(phrase))
        return "(.*)".join(re.escape(part) for part in parts)

    def reason(self, text: str) -> str:
        """Why a call failed, as the engine or tool said it: its first
        sentence, in Chinese where it is a refusal the demo knows."""
        said = _first_sentence(text)
        return _CHINESE_REFUSALS.get(said, said) if self.table else said

    def _template(self, phrase: str) -> str:
        # English is the phrase as written; a phrase missing from a table is a bug, so it fails.
        return self.table[phrase] if self.table else phrase


def _say_for(text: str) -> _Say:
    return _Say(_CHINESE) if written_in_chinese(text) else _Say()


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
        if messages and messages[0].get("content") == TITLE_PROMPT:
            reply = demo_title(_request(messages).removeprefix("Question:\n").split("\n\nAnswer:\n")[0])
        elif "call_subagent" in names:
            reply = self._lead(messages, tools)
        elif "web_search" in names:
            reply = self._search(messages, tools)
        elif "web_fetch" in names:
            reply = self._crawl(messages, tools)
        else:
            reply = _say_for(_request(messages))("This is the offline demo model; it has nothing to add.")
        prose, _, call = reply.partition("\n<tool_call>")
        words = _PIECE.findall(prose)
        for word in words:
            time.sleep(self.word_delay)
            yield Delta(content=word)
        if call:
            yield Delta(content="\n<tool_call>" + call)
        yield Delta(usage={"prompt_tokens": 0, "completion_tokens": len(words), "total_tokens": len(words)})

    # --- the agents -------------------------------------------------------------

    def _lead(self, messages: list[dict], tools: list) -> str:
        question = " ".join(_request(messages).split())
        say = _say_for(question)
        done = _exchanges(messages, tools)
        # The system prompt's inventory: what this conversation's earlier turns left.
        existing = dict(_INVENTORY_LINE.findall(messages[0]["content"]))
        steps = [lambda: _plan_write(question, existing=existing, say=say)]
        steps.append(
            lambda: (
                say("Searching the team library.") + _call("call_subagent", agent="search_agent", instruction=question)
            )
        )
        if len(done) >= len(steps):
            hits = _source_lines(done[1])
            if not hits:
                steps.append(lambda: _plan_nothing_found(question, search=_subagent_text(done[1]), say=say))
            else:
                urls = [url for _, url in hits[:MAX_SOURCES]]
                instruction = say("Read these sources and report what they say about: {question}", question=question)
                steps += [
                    lambda: _tick(SEARCH_STEP, say=say),
                    lambda: (
                        say("Reading the best sources.")
                        + _call("call_subagent", agent="crawl_agent", instruction="\n".join([instruction, *urls]))
                    ),
                    lambda: _tick(READ_STEP, say=say),
                ]
                # The inventory lists this turn's working copies too: a report created this turn is not a follow-up's.
                created = any(e.tool == "create_artifact" and e.params.get("id") == REPORT_ID for e in done)
                if REPORT_ID in existing and not created:
                    steps += _report_add_steps(question, done=done, at=len(steps), say=say)
                else:
                    steps += [
                        lambda: _report_create(question, crawl=done[3], say=say),
                        lambda: _tick(REPORT_STEP, say=say),
                    ]
        if len(done) < len(steps):
            return steps[len(done)]()
        return _answer(done, existing=existing, say=say)

    def _search(self, messages: list[dict], tools: list) -> str:
        query = _request(messages)[:200]
        say = _say_for(query)
        done = _exchanges(messages, tools)
        if not done:
            return say("Searching.") + _call("web_search", query=query)
        result = done[-1]
        if not result.ok:
            return say("The search failed: {reason}", reason=say.reason(_text(result.content)))
        hits = _HIT.findall(result.content)
        if not hits:
            shown = " ".join(query.split())
            provider = _SEARCHED.search(result.content)
            if provider and provider.group(1) == "local":
                return say("The team library has nothing on “{query}”: no document in it matches.", query=shown)
            return say("The search found nothing for “{query}”.", query=shown)
        # One line per hit, so the lead finds each hit by its line.
        lines = [
            f"- [{html.unescape(t)}]({html.unescape(u)}): {' '.join(html.unescape(s).split())}" for t, u, s in hits
        ]
        return say("Sources found:") + "\n\n" + "\n".join(lines)

    def _crawl(self, messages: list[dict], tools: list) -> str:
        request = _request(messages)
        say = _say_for(request)
        urls = _URL.findall(request)[:MAX_SOURCES]
        done = _exchanges(messages, tools)
        if len(done) < len(urls):
            return say("Reading {url}.", url=urls[len(done)]) + _call("web_fetch", url=urls[len(done)])
        parts = []
        for url, result in zip(urls, done, strict=False):
            page = _PAGE.search(result.content)
            if page is None:
                reason = say("Could not read it: {reason}", reason=say.reason(_text(result.content)))
                parts.append(f"### {url}\n\n{reason}")
                continue
            text = html.unescape(page.group(2)).strip()
            excerpt = text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")
            parts.append(f"### {html.unescape(page.group(1)) or url}\n\n{say('Source: {url}', url=url)}\n\n{excerpt}")
        return "\n\n".join(parts) or say("There was nothing to read.")


# --- the lead's steps -------------------------------------------------------------


def _plan(question: str, *, say: _Say) -> str:
    return (
        say("Question: {question}", question=question[:200])
        + "\n\n"
        + "\n".join(f"- [ ] {say(step)}" for step in (SEARCH_STEP, READ_STEP, REPORT_STEP))
    )


def _plan_write(question: str, *, existing: dict, say: _Say) -> str:
    if PLAN_ID in existing:
        return say("This conversation has a task plan; I'll rewrite it for this question.") + _call(
            "rewrite_artifact", id=PLAN_ID, content=_plan(question, say=say)
        )
    return say("I'll plan the research first.") + _call(
        "create_artifact", id=PLAN_ID, title=say("Task plan"), content=_plan(question, say=say)
    )


def _plan_nothing_found(question: str, *, search: str, say: _Say) -> str:
    # Struck out rather than left open: an open step reads as work still to come.
    def noted(step: str, note: str) -> str:
        return say("{step}: {note}", step=step, note=note)

    steps = (
        f"- [x] {noted(say(SEARCH_STEP), search)}",
        f"- {noted(f'~~{say(READ_STEP)}~~', say('nothing to read'))}",
        f"- {noted(f'~~{say(REPORT_STEP)}~~', say('nothing to report'))}",
    )
    plan = say("Question: {question}", question=question[:200]) + "\n\n" + "\n".join(steps)
    return say("The search found nothing, so the plan ends here.") + _call("rewrite_artifact", id=PLAN_ID, content=plan)


def _tick(step: str, *, say: _Say) -> str:
    return say("Done: {step}.", step=say(step).lower()) + _call(
        "update_artifact", id=PLAN_ID, old_str=f"- [ ] {say(step)}", new_str=f"- [x] {say(step)}"
    )


def _report_section(crawl: _Exchange, *, say: _Say) -> str:
    return _subagent_text(crawl) or say("No source could be read, so there is nothing to report.")


def _report_create(question: str, *, crawl: _Exchange, say: _Say) -> str:
    report = (
        f"# {question[:200]}\n\n"
        + say(
            "*Written by the offline demo model from the team library; "
            "it quotes its sources rather than analysing them.*"
        )
        + f"\n\n## {say('What the sources say')}\n\n{_report_section(crawl, say=say)}\n"
    )
    return say("Writing the report.") + _call("create_artifact", id=REPORT_ID, title=say(REPORT_TITLE), content=report)


def _report_add_steps(question: str, *, done: list[_Exchange], at: int, say: _Say) -> list:
    """A follow-up adds a section at the end of the report, as the lead's
    prompt asks: the earlier sections and whatever a person wrote there stay.
    It reads the report first, and its end too when one read is not all of it.
    A report it cannot read stays as it was, and the plan's last step open."""
    steps = [lambda: say("Reading the report to add to it.") + _call("read_artifact", id=REPORT_ID)]
    if len(done) > at:
        if not done[at].ok:
            return steps
        tail = _tail_offset(done[at])
        if tail is not None:
            steps.append(
                lambda: say("Reading the end of the report.") + _call("read_artifact", id=REPORT_ID, offset=tail)
            )
    read_at = at + len(steps) - 1
    steps += [
        lambda: _report_add(question, crawl=done[3], read=done[read_at], say=say),
        lambda: _tick(REPORT_STEP, say=say),
    ]
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


def _report_add(question: str, *, crawl: _Exchange, read: _Exchange, say: _Say) -> str:
    section = f"## {question[:200]}\n\n{_report_section(crawl, say=say)}"
    text = _read_text(read).rstrip()
    if not text:
        return say("The report is empty; writing it for this question.") + _call(
            "rewrite_artifact", id=REPORT_ID, content=section + "\n"
        )
    # Its last lines, as many as it takes for one place in it to hold them, are where the section goes.
    lines = text.splitlines()
    count = ANCHOR_LINES
    while count < len(lines) and text.count("\n".join(lines[-count:])) > 1:
        count += 1
    anchor = "\n".join(lines[-count:])
    return say("Adding a section to the report.") + _call(
        "update_artifact", id=REPORT_ID, old_str=anchor, new_str=f"{anchor}\n\n{section}"
    )


# --- the lead's answer ------------------------------------------------------------


def _subagent_text(exchange: _Exchange) -> str:
    return html.unescape(re.sub(r"</?subagent_result[^>]*>", "", exchange.content)).strip()


def _source_lines(exchange: _Exchange) -> list[tuple[str, str]]:
    """The (title, url) of each source the search agent listed."""
    return _SOURCE_LINE.findall(_subagent_text(exchange)) if exchange.ok else []


def _answer(done: list[_Exchange], *, existing: dict, say: _Say) -> str:
    lines = _research_lines(done, existing=existing, say=say) + _artifact_lines(done, existing=existing, say=say)
    return (
        say(
            "This is the offline demo model: it quotes the team library rather than researching. "
            "What happened in this turn:"
        )
        + "\n\n"
        + "\n".join(lines)
        + "\n\n"
        + say("Set `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for a self-hosted server) to have a real model answer.")
    )


def _research_lines(done: list[_Exchange], *, existing: dict, say: _Say) -> list[str]:
    subagents = {exchange.params.get("agent"): exchange for exchange in done if exchange.tool == "call_subagent"}
    search, crawl = subagents.get("search_agent"), subagents.get("crawl_agent")
    hits = _source_lines(search) if search else []
    if not hits:
        said = _subagent_text(search) if search else say("The search did not run.")
        kept = say(" `{id}` still holds the earlier report.", id=REPORT_ID) if REPORT_ID in existing else ""
        return [
            "- " + say("{said} So there was nothing to read, and no report was written.{kept}", said=said, kept=kept)
        ]
    titles = {url: title for title, url in hits}
    plural = "s" if len(hits) > 1 else ""
    lines = ["- " + say("The search found {count} source{plural}.", count=len(hits), plural=plural)]
    report = _subagent_text(crawl) if crawl else ""
    urls = [url for _, url in hits[:MAX_SOURCES]]
    read = [url for url in urls if f"\n\n{say('Source: {url}', url=url)}\n\n" in f"\n\n{report}\n\n"]
    links = say(", ").join(f"[{titles[url]}]({url})" for url in read)
    lines.append("- " + (say("Read: {sources}.", sources=links) if read else say("Read nothing.")))
    could_not = say.pattern("Could not read it: {reason}")
    for url in urls:
        reason = re.search(rf"^### {re.escape(url)}\n\n{could_not}$", report, re.MULTILINE)
        if reason:
            lines.append(
                "- " + say("Not read: [{title}]({url}): {reason}", title=titles[url], url=url, reason=reason.group(1))
            )
    return lines


def _artifact_lines(done: list[_Exchange], *, existing: dict, say: _Say) -> list[str]:
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
            failed.append("- " + say("Could not {verb} `{id}`: {said}", verb=say(verb), id=artifact_id, said=said))
            continue
        if verb == "read":
            continue
        title = exchange.params.get("title") or existing.get(artifact_id)
        named = say("`{id}` ({title})", id=artifact_id, title=title) if title else f"`{artifact_id}`"
        first = written.setdefault(artifact_id, {"verb": verb, "named": named})
        first["version"] = re.search(r'<artifact version="(\d+)"', exchange.content).group(1)
    lines = ["- " + say(_DONE[w["verb"]], named=w["named"], version=w["version"]) for w in written.values()]
    return lines + failed
