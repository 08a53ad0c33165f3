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

A question that compares or lists things ("compare A and B", "A vs B", "A, B
and C", "比较A和B") has each searched on its own (search_agent once per
topic, with the topic alone, as a search box wants it), the best source of
each read, and the report sets them side by side in a table whose cells quote
the sources. A question about the conversation's uploads ("summarise the file
I dropped", "上传的文件") has them read with read_artifact instead, and the
report gives each one's outline and the sentences its parts begin with.

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

from artifactflow.names import name_shortened

from ..state import REFUSED_MESSAGES, PermissionDecision
from ..toolcalls import toolcalls_parse
from ..tools.base import Tool
from .base import TITLE_MAX_CHARS, TITLE_PROMPT, XML, Delta

PLAN_ID = "task_plan"
REPORT_ID = "research_report"
REPORT_TITLE = "Research report"
SEARCH_STEP, READ_STEP, REPORT_STEP = "Search the team library", "Read the best sources", "Write the report"
UPLOAD_STEP = "Read the uploaded files"
PLAN_STEPS, UPLOAD_STEPS = (SEARCH_STEP, READ_STEP, REPORT_STEP), (UPLOAD_STEP, REPORT_STEP)
MAX_SOURCES = 2
# The answer's first line: what the demo is, and so what its answer is not.
LIBRARY_HEAD = (
    "This is the offline demo model: it quotes the team library rather than researching. What happened in this turn:"
)
UPLOADS_HEAD = (
    "This is the offline demo model: it quotes your files rather than analysing them. What happened in this turn:"
)
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
_UPLOAD_LINE = re.compile(r"^- `([^`]+)` — (.*) \([^()]*, version \d+, from user_upload\): (.*)$", re.MULTILINE)
# The inventory's preview of a file that is not text (agents.context).
_NOT_TEXT = "(a stored file, not text)"
_ARTIFACT_TOOLS = {
    "create_artifact": "create",
    "rewrite_artifact": "rewrite",
    "update_artifact": "update",
    "read_artifact": "read",
}
_DONE_TOOLS = ("create_artifact", "rewrite_artifact", "update_artifact")
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
        title = next((c for c in clauses if c), "").rstrip("是的了")
    else:
        words = [w for w in re.findall(r"[\w][\w'-]*", question) if w.lower() not in _TITLE_STOP_WORDS][:6]
        title = " ".join(words)
        title = title[:1].upper() + title[1:]
    return name_shortened(title or question, limit=TITLE_MAX_CHARS)


# --- what a question asks about -----------------------------------------------------

MAX_TOPICS = 4
# The uploads a question about "the files" reads, newest first; and the most a question naming files reads.
MAX_UPLOADS = 3
# Words that name no topic, around or inside a part of a list.
_TOPIC_FILLER = _TITLE_STOP_WORDS | frozenset(
    "compare compared comparing comparison contrast contrasting versus vs between difference differences differ "
    "better best worse cheaper which us both each also just then now briefly s pros cons use using".split()
)
_TOPIC_INNER = frozenset("of the a an".split())
TOPIC_MAX_WORDS, TOPIC_MAX_HAN = 5, 12
_SENTENCE = re.compile(r"[.?!…;:\n。！？；：]+")
# A question compares things when it says so; "and" alone joins the parts of one subject
# ("readers and a writer"), so a list is split only with a comma in it or one of these words.
_EN_COMPARE = re.compile(
    r"\b(?:compare[sd]?|comparing|comparison|contrast(?:ing)?|versus|vs|differ(?:s|ence|ences)?)\b", re.I
)
_EN_SPAN_START = re.compile(
    r"\b(?:compare|comparing|contrast|contrasting|between|comparison of|differences? of)\s+", re.I
)
# Where the things compared end and what the question wants of them begins.
_EN_SPAN_END = re.compile(
    r"\s*,?\s+(?:for|in (?:terms|our|my|the|a)|regarding|when|if|so|because|given|as (?:a|an|the|our|part)|"
    r"and (?:which|what|how|why|tell|say|explain|give|list|show)|which|what|how|differ|compare|side by side)\b"
    r"|\s*[,(—–]\s*(?:which|what|how|and|for)\b|\s[—–]\s|\(",
    re.I,
)
_EN_JOIN = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|vs|versus)\s+", re.I)
_EN_JOIN_COMPARE = re.compile(r"\s+(?:with|to|against)\s+", re.I)
_ZH_COMPARE = re.compile("比较|对比|比一比|相比|区别|差异|不同|异同|优劣|优缺点|哪个|哪一个|哪种|还是|vs|VS|、")
_ZH_LEAD = re.compile(
    "^(?:请问|请|帮我|帮忙|能否|可否|可以|麻烦|给我|你能|我想|想)*(?:比较|对比|比一比|分析|说说|讲讲|介绍)?(?:一下)?"
)
_ZH_SPAN_END = re.compile(
    "[，,（(]|在|对于|对|用于|之间|的区别|的差异|的不同|的异同|的优缺点|的优劣|有什么|有何|有哪些|哪个|哪一个|哪种|"
    "谁更|更适合|更好|更划算|各|分别|相比|两者|三者|这两|这三|作比较|做比较|进行比较|比较"
)
_ZH_JOIN = re.compile(r"\s*(?:以及|还是|或者|和|与|跟|及|或|、|vs|VS|对比)\s*")


def question_topics(question: str) -> list[str]:
    """The things a question compares or lists ("compare A and B", "A vs B",
    "A, B and C", "比较A和B", "A与B有什么区别"), less the words around them
    ("for our lab's energy plan"), so each can be searched on its own; [] for a
    question about one thing."""
    for sentence in _SENTENCE.split(question.replace("vs.", "vs")):
        # A Chinese sentence may name English things ("比较 heat pumps 和 …").
        chinese = written_in_chinese(sentence)
        topics = _chinese_topics(sentence) if chinese else _english_topics(sentence)
        if not topics and not chinese and _HAN_CHARACTER.search(sentence):
            topics = _chinese_topics(sentence)
        if topics:
            return topics[:MAX_TOPICS]
    return []


def _english_topics(sentence: str) -> list[str]:
    compares = _EN_COMPARE.search(sentence)
    if not compares and "," not in sentence:
        return []
    start = _EN_SPAN_START.search(sentence)
    span = sentence[start.end() :] if start else sentence
    end = _EN_SPAN_END.search(span)
    span = span[: end.start()] if end else span
    parts = _EN_JOIN.split(span)
    if len(parts) == 1 and start:
        # "compare A with B", "contrast A to B"
        parts = _EN_JOIN_COMPARE.split(span, maxsplit=1)
    return _topics_kept([_english_topic(part) for part in parts])


def _english_topic(part: str) -> str:
    words = re.findall(r"[\w][\w'’./+-]*", part)
    # Asking words before the subject ("how do", "tell me about"), filler after it.
    while words and words[0].lower() in _TOPIC_FILLER:
        words.pop(0)
    while words and words[-1].lower() in _TOPIC_FILLER:
        words.pop()
    inner = {word.lower() for word in words} - _TOPIC_INNER
    if not words or len(words) > TOPIC_MAX_WORDS or inner & _TOPIC_FILLER:
        return ""
    return " ".join(words)


def _chinese_topics(sentence: str) -> list[str]:
    if not _ZH_COMPARE.search(sentence):
        return []
    span = _ZH_LEAD.sub("", sentence.strip())
    end = _ZH_SPAN_END.search(span, 1)
    span = span[: end.start()] if end else span
    return _topics_kept([_chinese_topic(part) for part in _ZH_JOIN.split(span)])


def _chinese_topic(part: str) -> str:
    part = re.sub("^(?:的|一下|我们的|我们|我的)+|(?:的|了|吗|呢)+$", "", part.strip(" “”\"'"))
    too_long = len(_HAN_CHARACTER.findall(part)) > TOPIC_MAX_HAN or len(_LATIN_WORD.findall(part)) > TOPIC_MAX_WORDS
    return "" if too_long or re.search("我|你|他们", part) else part


def _topics_kept(topics: list[str]) -> list[str]:
    """Two or more topics, each named once; none if any part is no topic, so a
    sentence that only looked like a list is searched whole."""
    kept = list({topic.casefold(): topic for topic in reversed(topics)}.values())[::-1]
    return kept if len(kept) >= 2 and all(topics) else []


_UPLOAD_REFERENCE = re.compile(
    r"\b(?:uploaded|uploads|(?:the|my) upload|attached|attachments?|I (?:just )?dropped|"
    r"(?:this|that|these|those|my|the) (?:files?|pdfs?)|all (?:of )?(?:the |my )?(?:files|documents|docs|uploads)|"
    r"(?:this|that|these|those|my) (?:documents?|docs?|notes|papers?|spreadsheets?)|files? I\b)"
    r"|上传|附件|拖进|这个文件|这份文件|这些文件|这几个文件|这几份文件|(?:所有|全部)的?(?:文件|文档)|"
    r"这个文档|这份文档|这篇文档|这些文档|我发的|文件里|文件中",
    re.I,
)
_MANY_UPLOADS = re.compile(
    r"\b(?:files|documents|docs|uploads|attachments|pdfs|them|all)\b|这些|所有|全部|几个|几份|都", re.I
)
# A file named by its stem alone must look like a file's name, not a word of
# the question: "meeting_notes", "test_plan_热泵", "Q3-budget", not "notes".
_STEM_MIN_CHARS = 3
_PLAIN_WORD = re.compile(r"[A-Za-z]+")


def upload_reference(question: str) -> int:
    """How many of the conversation's uploads the question asks about: 0 when it
    names none, 1 for "the file I dropped", MAX_UPLOADS for "the files I uploaded"."""
    if not _UPLOAD_REFERENCE.search(question):
        return 0
    return MAX_UPLOADS if _MANY_UPLOADS.search(question) else 1


def uploads_chosen(question: str, *, uploads: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The uploads, (id, file name) oldest first as the inventory lists them,
    that the question asks to have read: those it names, in the order it
    names them; else the newest for "the file", the newest MAX_UPLOADS for
    "these files" or "所有文件"; none for a question about no upload."""
    named = sorted(
        ((at, upload) for upload in uploads if (at := _named_at(question, upload)) is not None), key=lambda x: x[0]
    )
    if named:
        return [upload for _, upload in named][:MAX_UPLOADS]
    return uploads[::-1][: upload_reference(question)]


def _named_at(question: str, upload: tuple[str, str]) -> int | None:
    """Where the question names the upload: by its file name or its id, with
    or without the extension (a stem only when it looks like a file's name)."""
    names = set()
    for name in upload:
        names.add(name)
        stem, dot, _ = name.rpartition(".")
        if dot and len(stem) >= _STEM_MIN_CHARS and not _PLAIN_WORD.fullmatch(stem):
            names.add(stem)
    # Longest first, so "notes.txt" is found where "notes.txt" is written, not its stem.
    for name in sorted(names, key=len, reverse=True):
        # A Latin name is not part of a longer word; next to Chinese, which has no spaces, it may be.
        found = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", question, re.I)
        if found:
            return found.start()
    return None


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
    LIBRARY_HEAD: "这是离线演示模型：它只摘录团队资料库的原文，并不真正做研究。本轮做了这些事：",
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
    # A question that compares or lists topics.
    "Topics: {topics}": "主题：{topics}",
    "Searching the team library for “{topic}”.": "正在团队资料库中检索“{topic}”。",
    "Comparison": "对比",
    "*Side by side, what each source says, in its own words: the demo model quotes them and does not weigh "
    "one against the other.*": "*并列摘录每份资料的原话：演示模型只摘录，不替你权衡取舍。*",
    "Aspect": "方面",
    "Source": "来源",
    "What it says first": "开篇怎么说",
    "A figure it gives": "文中的一个数字",
    "What else it covers": "还涉及哪些内容",
    "The team library has nothing on it.": "团队资料库中没有相关资料。",
    "Not read.": "未能阅读。",
    "Sections: {sections}": "章节：{sections}",
    "The question names {count} topics; each was searched for on its own: {topics}.": (
        "问题涉及 {count} 个主题，逐个分别检索：{topics}。"
    ),
    "`{id}` sets what the sources say side by side in a table.": "`{id}` 用表格并列了各份资料的内容。",
    # A question about the conversation's uploads.
    UPLOAD_STEP: "阅读上传的文件",
    UPLOADS_HEAD: "这是离线演示模型：它只摘录你上传的文件，并不真正分析。本轮做了这些事：",
    "Reading the upload `{id}` ({title}).": "正在读取上传的文件 `{id}`（{title}）。",
    "The uploaded files": "上传的文件",
    "*Written by the offline demo model from the files uploaded to this conversation; it quotes them rather "
    "than analysing them.*": "*本报告由离线演示模型根据这个对话中上传的文件撰写：它摘录原文，不做分析。*",
    "Read: {size}.": "已读取：{size}。",
    "{chars} characters": "{chars} 个字符",
    "the first {chars} of its {total} characters": "全文 {total} 个字符中的前 {chars} 个",
    "**Outline:** {headings}": "**提纲：** {headings}",
    "**How its parts begin:**": "**各部分的开头：**",
    "Read the upload {named} and summarised it in the report.": "已读取上传的文件 {named}，并在报告中做了摘要。",
    "This conversation has no uploaded text file to read: upload one (Markdown, text, Word or PDF) and ask again.": (
        "这个对话中没有可读的上传文本文件：请先上传一个（Markdown、纯文本、Word 或 PDF），再提问。"
    ),
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
    """This activation's tool calls with their results, oldest first: those
    after its request, since a subagent called again sees its earlier activations."""
    schemas = {tool.name: tool.parameters for tool in tools}
    found, params = [], {}
    start = next((i for i in range(len(messages) - 1, -1, -1) if _is_request(messages[i])), 0)
    for message in messages[start:]:
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
        if _is_request(message):
            return message["content"]
    return ""


def _is_request(message: dict) -> bool:
    return message["role"] == "user" and not (message["content"] or "").startswith(("<tool_result", "<context_summary"))


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
        # The system prompt's inventory: what this conversation's earlier turns left, and what the user uploaded.
        existing = dict(_INVENTORY_LINE.findall(messages[0]["content"]))
        uploads = [
            (i, title) for i, title, preview in _UPLOAD_LINE.findall(messages[0]["content"]) if preview != _NOT_TEXT
        ]
        chosen = uploads_chosen(question, uploads=uploads)
        if chosen or upload_reference(question):
            return _lead_uploads(question, done=done, uploads=chosen, existing=existing, say=say)
        topics = question_topics(question)
        if topics:
            return _lead_topics(question, topics, done=done, existing=existing, say=say)
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
                parts = lambda: _sources_parts((done[3],), say=say)  # noqa: E731
                steps += _report_steps(question, done=done, existing=existing, parts=parts, say=say)
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
            # A library hit is read as passages, each in a tag of its own.
            text = html.unescape(re.sub(r"\s*</?passage\b[^>]*>\s*", "\n\n", page.group(2))).strip()
            excerpt = text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")
            part = f"### {html.unescape(page.group(1)) or url}\n\n{say('Source: {url}', url=url)}\n\n{excerpt}"
            # What the rest of the page covers: an excerpt is its beginning only.
            sections = re.findall(r"^##\s+(.+?)\s*#*$", text, re.MULTILINE)
            if sections:
                part += "\n\n" + say("Sections: {sections}", sections=" · ".join(sections))
            parts.append(part)
        return "\n\n".join(parts) or say("There was nothing to read.")


# --- the lead's steps -------------------------------------------------------------


def _plan(question: str, *, say: _Say, steps: tuple[str, ...] = PLAN_STEPS, topics: list[str] = ()) -> str:
    return "\n\n".join(
        [
            say("Question: {question}", question=question[:200]),
            *([say("Topics: {topics}", topics=say(", ").join(topics))] if topics else []),
            "\n".join(f"- [ ] {say(step)}" for step in steps),
        ]
    )


def _plan_write(
    question: str, *, existing: dict, say: _Say, steps: tuple[str, ...] = PLAN_STEPS, topics: list[str] = ()
) -> str:
    plan = _plan(question, say=say, steps=steps, topics=topics)
    if PLAN_ID in existing:
        return say("This conversation has a task plan; I'll rewrite it for this question.") + _call(
            "rewrite_artifact", id=PLAN_ID, content=plan
        )
    return say("I'll plan the research first.") + _call(
        "create_artifact", id=PLAN_ID, title=say("Task plan"), content=plan
    )


def _plan_nothing_found(question: str, *, search: str, say: _Say, topics: list[str] = ()) -> str:
    # Struck out rather than left open: an open step reads as work still to come.
    def noted(step: str, note: str) -> str:
        return say("{step}: {note}", step=step, note=note)

    steps = (
        f"- [x] {noted(say(SEARCH_STEP), search)}",
        f"- {noted(f'~~{say(READ_STEP)}~~', say('nothing to read'))}",
        f"- {noted(f'~~{say(REPORT_STEP)}~~', say('nothing to report'))}",
    )
    plan = _plan(question, say=say, steps=(), topics=topics).rstrip() + "\n\n" + "\n".join(steps)
    return say("The search found nothing, so the plan ends here.") + _call("rewrite_artifact", id=PLAN_ID, content=plan)


# --- a question that compares or lists topics ------------------------------------------


@dataclass(frozen=True)
class _Topic:
    """A topic of the question, what its search found and the source read for it."""

    name: str
    search: _Exchange
    title: str = ""
    url: str = ""


def _lead_topics(question: str, topics: list[str], *, done: list[_Exchange], existing: dict, say: _Say) -> str:
    """Each topic searched on its own, the best source of each read, and the
    report sets them side by side in a table."""
    steps = [lambda: _plan_write(question, existing=existing, say=say, topics=topics)]
    for topic in topics:
        steps.append(
            lambda topic=topic: (
                say("Searching the team library for “{topic}”.", topic=topic)
                + _call("call_subagent", agent="search_agent", instruction=topic)
            )
        )
    if len(done) >= len(steps):
        found = _topics_found(topics, searches=done[1 : len(steps)])
        urls = list(dict.fromkeys(topic.url for topic in found if topic.url))
        if not urls:
            searched = " ".join(_subagent_text(topic.search) for topic in found)
            steps.append(lambda: _plan_nothing_found(question, search=searched, say=say, topics=topics))
        else:
            steps.append(lambda: _tick(SEARCH_STEP, say=say))
            reads_at = len(steps)
            for url in urls:
                about = say(", ").join(topic.name for topic in found if topic.url == url)
                instruction = say("Read these sources and report what they say about: {question}", question=about)
                steps.append(
                    lambda url=url, instruction=instruction: (
                        say("Reading {url}.", url=url)
                        + _call("call_subagent", agent="crawl_agent", instruction=f"{instruction}\n{url}")
                    )
                )
            steps.append(lambda: _tick(READ_STEP, say=say))

            def parts() -> Parts:
                crawls = done[reads_at : reads_at + len(urls)]
                read = dict(zip(urls, crawls, strict=True))
                return [(say("Comparison"), _comparison(found, read=read, say=say)), *_sources_parts(crawls, say=say)]

            steps += _report_steps(question, done=done, existing=existing, parts=parts, say=say)
    if len(done) < len(steps):
        return steps[len(done)]()
    return _answer(done, existing=existing, say=say, topics=topics)


def _topics_found(topics: list[str], *, searches: list[_Exchange]) -> list[_Topic]:
    """Each topic with the source to read for it: its best hit that no topic
    before it took, else its best hit (both topics then share one source)."""
    found, taken = [], set()
    for name, search in zip(topics, searches, strict=True):
        hits = _source_lines(search)
        title, url = next(((t, u) for t, u in hits if u not in taken), hits[0] if hits else ("", ""))
        taken.add(url)
        found.append(_Topic(name=name, search=search, title=title, url=url))
    return found


def _comparison(found: list[_Topic], *, read: dict[str, _Exchange], say: _Say) -> str:
    """A table with a column per topic and a row per aspect, each cell what
    that topic's source says: how it begins, a sentence with a figure, what
    else it covers. A topic with no source, or one not read, says why."""
    columns = []
    for topic in found:
        crawl = read.get(topic.url)
        if not topic.url:
            columns.append(("—", say("The team library has nothing on it."), "", ""))
            continue
        source = f"[{_cell(topic.title)}]({topic.url})"
        quoted = _quoted(_subagent_text(crawl), url=topic.url, say=say) if crawl and crawl.ok else None
        if quoted is None:
            columns.append((source, say("Not read."), "", ""))
            continue
        text, sections = quoted
        sentences = _sentences(text)
        opening = sentences[0] if sentences else ""
        figure = next((s for s in sentences[1:] if _FIGURE.search(s)), "")
        columns.append((source, opening, figure, sections))
    rows = [say("Source"), say("What it says first"), say("A figure it gives"), say("What else it covers")]
    table = [
        "| " + " | ".join([say("Aspect"), *(_cell(topic.name) for topic in found)]) + " |",
        "|" + " --- |" * (len(found) + 1),
    ]
    for index, row in enumerate(rows):
        table.append("| " + " | ".join([row, *(_cell(column[index]) or "—" for column in columns)]) + " |")
    note = say(
        "*Side by side, what each source says, in its own words: the demo model quotes them and does not weigh "
        "one against the other.*"
    )
    return note + "\n\n" + "\n".join(table)


# A sentence ends at its stop and the space after it, or at a Chinese stop.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9“\"(*])|(?<=[。！？])")
# A number with a unit or a share: the kind of figure a comparison weighs.
_FIGURE = re.compile(
    r"\d(?:[\d.,]*\d)?(?:\s*[–-]\s*\d(?:[\d.,]*\d)?)?\s*"
    r"(?:%|°C|kWh|Wh|kW|MW|GW|years?|hours?|cycles?|times|pages|ms|MB|GB|年|次|度|倍|小时|千瓦|万|元)"
)
CELL_MAX_CHARS = 240


def _quoted(text: str, *, url: str, say: _Say) -> tuple[str, str] | None:
    """What the crawl agent quoted of the source at `url`, and the sections it
    listed; None when it could not read it."""
    source = re.search(rf"^{re.escape(say('Source: {url}', url=url))}\n\n(.*?)(?=\n### |\Z)", text, re.M | re.S)
    if source is None:
        return None
    quoted = source.group(1).strip()
    sections = re.search(rf"\n\n{say.pattern('Sections: {sections}')}$", quoted)
    if sections:
        return quoted[: sections.start()], sections.group(1)
    return quoted, ""


def _sentences(text: str) -> list[str]:
    """The whole sentences of a quote's prose, its headings and tables left
    out, its list items as sentences; a sentence the quote cut off is dropped."""
    sentences = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith(("#", "|"))]
        prose = " ".join(re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", line).strip() for line in lines)
        sentences += [sentence.strip() for sentence in _SENTENCE_END.split(prose) if sentence.strip()]
    if sentences and sentences[-1].endswith("…"):
        sentences.pop()
    return sentences


def _cell(text: str) -> str:
    """Text that stays in one cell of a Markdown table."""
    text = " ".join(text.split()).replace("|", "\\|")
    return text[:CELL_MAX_CHARS] + "…" if len(text) > CELL_MAX_CHARS else text


# --- a question about the conversation's uploads --------------------------------------------


def _lead_uploads(question: str, *, done: list[_Exchange], uploads: list, existing: dict, say: _Say) -> str:
    """The uploads the question names read with read_artifact, and each
    summarised in the report by its outline and the sentences its parts begin with."""
    if not uploads:
        return (
            _answer_head(say)
            + "- "
            + say(
                "This conversation has no uploaded text file to read: upload one (Markdown, text, Word or PDF) and ask again."
            )
            + _answer_foot(say)
        )
    steps = [lambda: _plan_write(question, existing=existing, say=say, steps=UPLOAD_STEPS)]
    for artifact_id, title in uploads:
        steps.append(
            lambda artifact_id=artifact_id, title=title: (
                say("Reading the upload `{id}` ({title}).", id=artifact_id, title=title)
                + _call("read_artifact", id=artifact_id)
            )
        )
    if len(done) >= len(steps):
        reads = done[1 : len(steps)]
        # A file that could not be read leaves its step open; the answer says why.
        if any(read.ok for read in reads):
            steps.append(lambda: _tick(UPLOAD_STEP, say=say))
            parts = lambda: [(say("The uploaded files"), _uploads_summary(reads, say=say))]  # noqa: E731
            note = (
                "*Written by the offline demo model from the files uploaded to this conversation; it quotes them rather "
                "than analysing them.*"
            )
            steps += _report_steps(question, done=done, existing=existing, parts=parts, say=say, note=note)
    if len(done) < len(steps):
        return steps[len(done)]()
    return _answer(done, existing=existing, say=say)


UPLOAD_SENTENCES = 6


def _uploads_summary(reads: list[_Exchange], *, say: _Say) -> str:
    summaries = []
    for read in reads:
        if not read.ok:
            continue
        head = re.match(r"<artifact ([^>]*)>", read.content)
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', head.group(1)))
        text = _read_text(read)
        lines = [f"### {html.unescape(attrs.get('title', '')) or attrs['id']} (`{html.unescape(attrs['id'])}`)", ""]
        size = say("{chars} characters", chars=len(text))
        if "of" in attrs:
            size = say("the first {chars} of its {total} characters", chars=len(text), total=attrs["of"])
        lines.append(say("Read: {size}.", size=size))
        outline = re.findall(r"^#{1,3}\s+(.+?)\s*#*$", text, re.M)
        if outline:
            lines += ["", say("**Outline:** {headings}", headings=" · ".join(outline[:12]))]
        firsts = [sentences[0] for block in re.split(r"\n\s*\n", text) if (sentences := _sentences(block))]
        if firsts:
            lines += ["", say("**How its parts begin:**"), ""]
            lines += [f"- {' '.join(sentence.split())}" for sentence in firsts[:UPLOAD_SENTENCES]]
        summaries.append("\n".join(lines))
    return "\n\n".join(summaries)


def _tick(step: str, *, say: _Say) -> str:
    return say("Done: {step}.", step=say(step).lower()) + _call(
        "update_artifact", id=PLAN_ID, old_str=f"- [ ] {say(step)}", new_str=f"- [x] {say(step)}"
    )


# A report's parts: (heading, Markdown) pairs, made once the tool results they quote are in.
Parts = list[tuple[str, str]]
DEMO_NOTE = (
    "*Written by the offline demo model from the team library; it quotes its sources rather than analysing them.*"
)


def _sources_parts(crawls: Iterable[_Exchange], *, say: _Say) -> Parts:
    text = "\n\n".join(filter(None, (_subagent_text(crawl) for crawl in crawls)))
    return [(say("What the sources say"), text or say("No source could be read, so there is nothing to report."))]


def _report_steps(question: str, *, done: list[_Exchange], existing: dict, parts, say: _Say, note: str = DEMO_NOTE):
    """Write the report and tick the plan's last step: a new report, or a
    section added to the one an earlier turn wrote. `parts` makes the report's
    parts when its step comes, from the tool results so far."""
    # The inventory lists this turn's working copies too: a report created this turn is not a follow-up's.
    created = any(e.tool == "create_artifact" and e.params.get("id") == REPORT_ID for e in done)
    if REPORT_ID in existing and not created:
        return _report_add_steps(question, done=done, parts=parts, say=say)
    return [
        lambda: _report_create(question, parts=parts(), note=note, say=say),
        lambda: _tick(REPORT_STEP, say=say),
    ]


def _report_create(question: str, *, parts: Parts, note: str, say: _Say) -> str:
    body = "\n\n".join(f"## {heading}\n\n{text}" for heading, text in parts)
    report = f"# {question[:200]}\n\n{say(note)}\n\n{body}\n"
    return say("Writing the report.") + _call("create_artifact", id=REPORT_ID, title=say(REPORT_TITLE), content=report)


def _report_add_steps(question: str, *, done: list[_Exchange], parts, say: _Say) -> list:
    """A follow-up adds a section at the end of the report, as the lead's
    prompt asks: the earlier sections and whatever a person wrote there stay.
    It reads the report first, and its end too when one read is not all of it.
    A report it cannot read stays as it was, and the plan's last step open."""
    at = _report_step_at(done)
    steps = [lambda: say("Reading the report to add to it.") + _call("read_artifact", id=REPORT_ID)]
    if at is not None:
        if not done[at].ok:
            return steps
        tail = _tail_offset(done[at])
        if tail is not None:
            steps.append(
                lambda: say("Reading the end of the report.") + _call("read_artifact", id=REPORT_ID, offset=tail)
            )
    read_at = (at or 0) + len(steps) - 1
    steps += [
        lambda: _report_add(question, parts=parts(), read=done[read_at], say=say),
        lambda: _tick(REPORT_STEP, say=say),
    ]
    return steps


def _report_step_at(done: list[_Exchange]) -> int | None:
    """Where in this turn's calls the lead first read the report."""
    return next((i for i, e in enumerate(done) if e.tool == "read_artifact" and e.params.get("id") == REPORT_ID), None)


def _read_text(exchange: _Exchange) -> str:
    content = re.search(r"<content>(.*)</content>", exchange.content, re.DOTALL)
    return html.unescape(content.group(1)) if content else ""


def _tail_offset(exchange: _Exchange) -> int | None:
    """Where to read the end of an artifact one read did not return whole."""
    part = re.match(r'<artifact [^>]*\bchars="(\d+)-(\d+)" of="(\d+)"', exchange.content)
    if not exchange.ok or part is None or int(part.group(2)) >= int(part.group(3)):
        return None
    return max(0, int(part.group(3)) - TAIL_CHARS)


def _report_add(question: str, *, parts: Parts, read: _Exchange, say: _Say) -> str:
    # Under the question's heading, the parts need no headings of their own.
    section = f"## {question[:200]}\n\n" + "\n\n".join(text for _, text in parts)
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
    """The (title, url) of each document the search agent listed, once: the
    library lists a document's best passages (library://9#3), and the demo
    reads and quotes documents whole (library://9), from their start and
    their sections."""
    lines = {}
    for title, url in _SOURCE_LINE.findall(_subagent_text(exchange)) if exchange.ok else []:
        lines.setdefault(url.partition("#")[0], title)
    return [(title, url) for url, title in lines.items()]


def _answer_head(say: _Say, *, head: str = LIBRARY_HEAD) -> str:
    return say(head) + "\n\n"


def _answer_foot(say: _Say) -> str:
    return "\n\n" + say(
        "Set `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for a self-hosted server) to have a real model answer."
    )


def _answer(done: list[_Exchange], *, existing: dict, say: _Say, topics: list[str] = ()) -> str:
    if any(e.tool == "call_subagent" for e in done):
        head, lines = LIBRARY_HEAD, _research_lines(done, existing=existing, topics=topics, say=say)
    else:
        head, lines = UPLOADS_HEAD, _upload_lines(done, say=say)
    lines += _artifact_lines(done, existing=existing, say=say)
    return _answer_head(say, head=head) + "\n".join(lines) + _answer_foot(say)


def _upload_lines(done: list[_Exchange], *, say: _Say) -> list[str]:
    lines = []
    for exchange in done:
        head = re.match(r"<artifact ([^>]*)>", exchange.content)
        if exchange.tool != "read_artifact" or not exchange.ok or head is None:
            continue
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', head.group(1)))
        if attrs.get("id") != REPORT_ID:
            named = say("`{id}` ({title})", id=html.unescape(attrs["id"]), title=html.unescape(attrs.get("title", "")))
            lines.append("- " + say("Read the upload {named} and summarised it in the report.", named=named))
    return lines


def _research_lines(done: list[_Exchange], *, existing: dict, topics: list[str], say: _Say) -> list[str]:
    searches = [e for e in done if e.tool == "call_subagent" and e.params.get("agent") == "search_agent"]
    crawls = [e for e in done if e.tool == "call_subagent" and e.params.get("agent") == "crawl_agent"]
    titles = {url: title for search in reversed(searches) for title, url in _source_lines(search)}
    if not titles:
        said = " ".join(_subagent_text(s) for s in searches) if searches else say("The search did not run.")
        kept = say(" `{id}` still holds the earlier report.", id=REPORT_ID) if REPORT_ID in existing else ""
        return [
            "- " + say("{said} So there was nothing to read, and no report was written.{kept}", said=said, kept=kept)
        ]
    lines = []
    if len(topics) > 1:
        named = say(", ").join(f"“{topic}”" for topic in topics)
        lines.append(
            "- "
            + say(
                "The question names {count} topics; each was searched for on its own: {topics}.",
                count=len(topics),
                topics=named,
            )
        )
        lines += ["- " + _subagent_text(search) for search in searches if not _source_lines(search)]
    plural = "s" if len(titles) > 1 else ""
    lines.append("- " + say("The search found {count} source{plural}.", count=len(titles), plural=plural))
    report = "\n\n".join(_subagent_text(crawl) for crawl in crawls)
    # The sources the lead asked to be read: the URLs of its instructions to the crawl agent.
    urls = [url for crawl in crawls for url in _URL.findall(crawl.params.get("instruction", "")) if url in titles]
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
    written = any(e.ok and e.params.get("id") == REPORT_ID and e.tool in _DONE_TOOLS for e in done)
    if len(topics) > 1 and read and written:
        lines.append("- " + say("`{id}` sets what the sources say side by side in a table.", id=REPORT_ID))
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
