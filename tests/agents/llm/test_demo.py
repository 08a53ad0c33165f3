"""The offline demo model drives a whole research turn through the real
engine, library, permission prompts and artifacts, with no network."""

import io
import re

import docx
import pytest

from agents.llm.demo import (
    MAX_UPLOADS,
    REPORT_ID,
    DemoChatModel,
    question_topics,
    upload_reference,
    uploads_chosen,
    written_in_chinese,
)
from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.state import pending_request
from artifacts import services as artifact_services
from artifacts.branches import branch_shown
from artifacts.models import Artifact, ArtifactVersion
from conversations import lifecycle

pytestmark = pytest.mark.django_db

WAL_QUESTION = "How does SQLite WAL mode let readers and a writer work at once?"


def _execute(run):
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _turn(user, question):
    conversation = lifecycle.conversation_start(user=user, content=question, enqueue=False)
    return _execute(conversation.active_branch.runs.get())


def _follow_up(conversation, question):
    message = lifecycle.message_post(conversation=conversation, content=question, enqueue=False)
    return _execute(message.runs.get())


def _answer_until_done(run, user, decision):
    asked = []
    while run.status == Run.Status.WAITING_PERMISSION:
        pending = pending_request(run.checkpoint)
        asked.append(pending.params["url"])
        permission_answer(run_id=run.pk, user=user, request_id=pending.id, decision=decision)
        run = _execute(run)
    return run, asked


def _failed_tools(run):
    return [event.data for event in run.events.filter(type=RunEvent.Type.TOOL_COMPLETE) if not event.data["success"]]


def _said_by(run, agent):
    return run.events.get(type=RunEvent.Type.AGENT_COMPLETE, agent=agent).data["response"]


def test_the_demo_plans_searches_reads_through_the_prompt_and_reports(user, demo_model):
    run = _turn(user, WAL_QUESTION)
    assert run.status == Run.Status.WAITING_PERMISSION

    run, asked = _answer_until_done(run, user, "approve")

    assert run.status == Run.Status.COMPLETED and run.model == "demo"
    assert asked and all(url.startswith("library://") for url in asked)
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    assert "SQLite WAL mode" in report.content and "checkpoint" in report.content
    plan = Artifact.objects.get(artifact_id="task_plan").content
    assert "- [ ]" not in plan and plan.count("- [x]") == 3
    agents = {event.agent for event in run.events.filter(type=RunEvent.Type.AGENT_START)}
    assert agents == {"lead_agent", "search_agent", "crawl_agent"}
    assert _failed_tools(run) == []
    answer = run.message.response
    assert "offline demo model" in answer and "OPENAI_API_KEY" in answer
    assert f"- The search found 1 source.\n- Read: [SQLite WAL mode]({asked[0]}).\n" in answer
    assert "- Created `task_plan` (Task plan), now at version 4." in answer
    assert "- Created `research_report` (Research report), now at version 1." in answer


def test_a_denied_read_is_reported_not_invented(user, demo_model):
    run, asked = _answer_until_done(_turn(user, "How does SQLite WAL mode work?"), user, "deny")

    assert run.status == Run.Status.COMPLETED and asked
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert "Could not read it" in report and "denied" in report
    assert "checkpoint" not in report
    answer = run.message.response
    assert "- Read nothing.\n" in answer and "Read:" not in answer
    assert f"- Not read: [SQLite WAL mode]({asked[0]}): The user denied this call." in answer


def test_a_question_the_library_does_not_cover_is_said_plainly(user, demo_model):
    run = _turn(user, "How does photosynthesis work?")

    # Nothing to read, so nobody is asked for permission.
    assert run.status == Run.Status.COMPLETED
    agents = {event.agent for event in run.events.filter(type=RunEvent.Type.AGENT_START)}
    assert agents == {"lead_agent", "search_agent"}
    nothing = "The team library has nothing on “How does photosynthesis work?”: no document in it matches."
    assert _said_by(run, "search_agent") == nothing
    assert f"- {nothing} So there was nothing to read, and no report was written." in run.message.response
    assert "Read" not in run.message.response and "research_report" not in run.message.response
    assert not Artifact.objects.filter(artifact_id=REPORT_ID).exists()
    plan = Artifact.objects.get(artifact_id="task_plan").content
    assert f"- [x] Search the team library: {nothing}" in plan and "- [ ]" not in plan
    assert "~~Read the best sources~~" in plan and "~~Write the report~~" in plan
    assert _failed_tools(run) == []


def test_a_failed_search_is_said_not_hidden(user, demo_model, settings):
    settings.SEARCH_PROVIDER = "searxng"

    run = _turn(user, "How does SQLite WAL mode work?")

    assert run.status == Run.Status.COMPLETED
    failed = "The search failed: The searxng provider is chosen but SEARXNG_URL is not set."
    assert _said_by(run, "search_agent") == failed
    assert f"- {failed} So there was nothing to read, and no report was written." in run.message.response
    assert not Artifact.objects.filter(artifact_id=REPORT_ID).exists()


def test_a_follow_up_rewrites_the_plan_and_adds_a_section_to_the_report(user, demo_model):
    first, _ = _answer_until_done(_turn(user, WAL_QUESTION), user, "approve")
    conversation = first.message.conversation

    run, asked = _answer_until_done(
        _follow_up(conversation, "Why are solid-state batteries hard to make?"), user, "approve"
    )

    assert run.status == Run.Status.COMPLETED and asked
    assert _failed_tools(run) == []
    tools = [event.data["tool"] for event in run.events.filter(type=RunEvent.Type.TOOL_START, agent="lead_agent")]
    assert "create_artifact" not in tools and tools.count("rewrite_artifact") == 1
    assert tools.count("read_artifact") == 1
    plan = Artifact.objects.get(artifact_id="task_plan")
    assert plan.current_version == 8
    assert plan.content.startswith("Question: Why are solid-state batteries hard to make?")
    assert plan.content.count("- [x]") == 3 and "- [ ]" not in plan.content
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    assert report.current_version == 2
    first_report = ArtifactVersion.objects.get(artifact=report, version=1).content
    # The first turn's report stays whole, with the follow-up's section after it.
    assert report.content.startswith(first_report.rstrip())
    assert "## Why are solid-state batteries hard to make?" in report.content
    assert report.content.index("checkpoint") < report.content.index("Solid-state batteries")
    answer = run.message.response
    assert "- Rewrote `task_plan` (Task plan), now at version 8." in answer
    assert "- Updated `research_report` (Research report), now at version 2." in answer
    assert "Created" not in answer


FOLLOW_UPS = (
    "Why are solid-state batteries hard to make?",
    "How efficient are heat pumps in cold weather?",
    "What is retrieval-augmented generation?",
)
TEAM_NOTE = "TEAM NOTE: 我们在生产环境中也启用了 WAL 模式 — keep checkpoints small."


def test_follow_ups_keep_every_topic_and_a_persons_edit(user, demo_model):
    first, _ = _answer_until_done(_turn(user, WAL_QUESTION), user, "approve")
    conversation = first.message.conversation
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    branch = branch_shown(conversation=conversation)
    edited = report.content.replace("## What the sources say", f"{TEAM_NOTE}\n\n## What the sources say")
    artifact_services.artifact_edit(branch=branch, artifact=report, content=edited, base_version=1)

    for question in FOLLOW_UPS:
        run, _ = _answer_until_done(_follow_up(conversation, question), user, "approve")
        assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []

    report.refresh_from_db()
    assert report.content.count(TEAM_NOTE) == 1
    headings = [WAL_QUESTION, *FOLLOW_UPS]
    positions = [report.content.index(question) for question in headings]
    assert positions == sorted(positions)
    for topic in ("checkpoint", "Solid-state", "Heat pump", "Retrieval"):
        assert topic.lower() in report.content.lower()
    # No agent's save dropped the person's text, so no conflict was noted.
    assert "conflict" not in report.metadata


def test_a_follow_up_adds_to_a_report_longer_than_one_read(user, demo_model, settings):
    settings.TOOL_RESULT_MAX_CHARS = 2_000
    first, _ = _answer_until_done(_turn(user, WAL_QUESTION), user, "approve")
    conversation = first.message.conversation
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    long_text = report.content + "\n" + "".join(f"- 第 {n} 条笔记：检查点。\n" for n in range(600))
    artifact_services.artifact_edit(
        branch=branch_shown(conversation=conversation), artifact=report, content=long_text, base_version=1
    )

    run, _ = _answer_until_done(_follow_up(conversation, FOLLOW_UPS[0]), user, "approve")

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    reads = run.events.filter(type=RunEvent.Type.TOOL_START, data__tool="read_artifact").count()
    assert reads == 2
    report.refresh_from_db()
    assert report.content.startswith(long_text.rstrip())
    assert report.content.rstrip().endswith(report.content.rstrip().split("\n")[-1])
    assert f"## {FOLLOW_UPS[0]}" in report.content[len(long_text) :]


def test_a_follow_up_the_library_does_not_cover_leaves_the_report(user, demo_model):
    first, _ = _answer_until_done(_turn(user, WAL_QUESTION), user, "approve")

    run = _follow_up(first.message.conversation, "How does photosynthesis work?")

    assert run.status == Run.Status.COMPLETED
    assert _failed_tools(run) == []
    plan = Artifact.objects.get(artifact_id="task_plan")
    assert plan.current_version == 6 and plan.content.startswith("Question: How does photosynthesis work?")
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    assert report.current_version == 1 and "checkpoint" in report.content
    answer = run.message.response
    assert f"no report was written. `{REPORT_ID}` still holds the earlier report." in answer
    assert "- Rewrote `task_plan` (Task plan), now at version 6." in answer


def test_a_report_that_could_not_be_written_is_not_claimed(user, demo_model):
    conversation = lifecycle.conversation_start(user=user, content=WAL_QUESTION, enqueue=False)
    # An image the user uploaded holds the report's id: it cannot be rewritten as text.
    artifact_services.artifact_upload(
        branch=branch_shown(conversation=conversation),
        filename=REPORT_ID,
        data=b"\x89PNG\r\n\x1a\n",
        content_type="image/png",
    )

    run, _ = _answer_until_done(_execute(conversation.active_branch.runs.get()), user, "approve")

    assert run.status == Run.Status.COMPLETED
    assert [failure["tool"] for failure in _failed_tools(run)] == ["read_artifact"]
    answer = run.message.response
    assert f"- Could not read `{REPORT_ID}`: Artifact '{REPORT_ID}' is a binary file (image/png)" in answer
    assert f"`{REPORT_ID}` (" not in answer
    # The report was not written, so the plan's last step stays open.
    assert "- Created `task_plan` (Task plan), now at version 3." in answer
    assert "- [ ] Write the report" in Artifact.objects.get(artifact_id="task_plan").content


# --- A question in Chinese ------------------------------------------------------------

# "COP" finds the heat pump document whose title has it, before Chinese words are searchable.
HEAT_QUESTION_ZH = "空气源热泵的 COP 在寒冷天气下会降到多少？"
BATTERY_QUESTION_ZH = "家用储能电池为什么多用 LFP 电芯？"
HEAT_TITLE_ZH = "空气源热泵在寒冷地区的性能（COP 与除霜）"
BATTERY_TITLE_ZH = "家用储能电池：容量、寿命与 LFP 电芯"
SOLAR_TITLE_ZH = "分布式光伏：屋顶电站的发电量与并网方式"
_HAN = re.compile(r"[\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
# What the text says, not the ids, URLs and setting names it names in passing.
_NAMES = re.compile(r"`[^`]*`|\((?:library|https?)://[^)]*\)|(?:library|https?)://\S+")


def _han_share(text):
    """The share of Han characters among the letters of the text's words."""
    words = _NAMES.sub("", text)
    han, latin = len(_HAN.findall(words)), len(_LATIN.findall(words))
    return han / (han + latin)


def _headings(markdown):
    return [line.lstrip("#").strip() for line in markdown.splitlines() if line.startswith("#")]


@pytest.mark.parametrize(
    ("text", "chinese"),
    [
        (HEAT_QUESTION_ZH, True),
        ("SQLite 的 WAL 模式怎样让读和写同时进行？", True),
        ("家用储能电池一般能用几年？", True),
        (WAL_QUESTION, False),
        ("What does 检查点 mean in SQLite WAL mode?", False),
        ("", False),
    ],
)
def test_a_question_is_chinese_when_its_han_characters_outnumber_its_latin_words(text, chinese):
    assert written_in_chinese(text) is chinese


def test_a_chinese_question_gets_a_chinese_plan_report_and_answer(user, demo_model):
    run, asked = _answer_until_done(_turn(user, HEAT_QUESTION_ZH), user, "approve")

    assert run.status == Run.Status.COMPLETED and len(asked) == 1
    assert _failed_tools(run) == []
    plan = Artifact.objects.get(artifact_id="task_plan")
    assert plan.title == "任务计划"
    assert plan.content == (f"问题：{HEAT_QUESTION_ZH}\n\n- [x] 检索团队资料库\n- [x] 阅读最相关的资料\n- [x] 撰写报告")
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    assert report.title == "研究报告"
    headings = _headings(report.content)
    assert headings[:3] == [HEAT_QUESTION_ZH, "资料中的相关内容", HEAT_TITLE_ZH]
    assert all(_han_share(heading) > 0.5 for heading in headings)
    assert f"来源：{asked[0]}" in report.content and "在寒冷天气下，COP 会降到多少" in report.content
    assert _han_share(report.content) > 0.9
    assert "Source" not in report.content and "What the sources say" not in report.content
    # The subagents answered the lead in Chinese too.
    # It lists passages of the document (library://1#2); the crawl agent reads the document.
    assert _said_by(run, "search_agent").startswith(f"找到的资料：\n\n- [{HEAT_TITLE_ZH}]({asked[0]}#")
    assert _said_by(run, "crawl_agent").startswith(f"### {HEAT_TITLE_ZH}\n\n来源：{asked[0]}\n\n")
    answer = run.message.response
    assert answer.startswith("这是离线演示模型：")
    assert f"- 检索找到了 1 份资料。\n- 已阅读：[{HEAT_TITLE_ZH}]({asked[0]})。\n" in answer
    assert "- 已创建 `task_plan`（任务计划），当前为第 4 版。" in answer
    assert "- 已创建 `research_report`（研究报告），当前为第 1 版。" in answer
    assert "`OPENAI_API_KEY`" in answer and _han_share(answer) > 0.9


@pytest.mark.parametrize(
    ("request_text", "pieces"),
    [
        # Chinese has no spaces to stream by: it streams a character at a time.
        ("请总结一下这个对话。", ["这", "是", "离", "线", "演", "示", "模", "型", "，", "没", "有", "什", "么"]),
        ("Summarise this conversation.", ["This", " is", " the", " offline", " demo", " model;", " it"]),
    ],
)
def test_the_demo_streams_word_by_word_and_chinese_character_by_character(request_text, pieces):
    messages = [{"role": "system", "content": "# Role"}, {"role": "user", "content": request_text}]

    streamed = [delta.content for delta in DemoChatModel(word_delay=0).stream(messages) if delta.content]

    assert streamed[: len(pieces)] == pieces


@pytest.mark.parametrize("first_question", [HEAT_QUESTION_ZH, WAL_QUESTION])
def test_a_chinese_follow_up_adds_a_chinese_section_and_keeps_the_report(user, demo_model, first_question):
    first, _ = _answer_until_done(_turn(user, first_question), user, "approve")
    first_report = Artifact.objects.get(artifact_id=REPORT_ID).content

    run, asked = _answer_until_done(_follow_up(first.message.conversation, BATTERY_QUESTION_ZH), user, "approve")

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    plan = Artifact.objects.get(artifact_id="task_plan")
    assert plan.current_version == 8
    assert plan.content == (
        f"问题：{BATTERY_QUESTION_ZH}\n\n- [x] 检索团队资料库\n- [x] 阅读最相关的资料\n- [x] 撰写报告"
    )
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    assert report.current_version == 2
    assert report.content.startswith(first_report.rstrip())
    section = report.content[len(first_report.rstrip()) :]
    assert _headings(section)[:2] == [BATTERY_QUESTION_ZH, BATTERY_TITLE_ZH]
    assert f"来源：{asked[0]}" in section and "磷酸铁锂" in section
    assert _han_share(section) > 0.9
    answer = run.message.response
    # The solar document, on 家用储能电池 for the evening, is read second.
    assert f"- 已阅读：[{BATTERY_TITLE_ZH}]({asked[0]})、[{SOLAR_TITLE_ZH}]({asked[1]})。\n" in answer
    # Named by the titles the first turn gave them, in its language.
    assert f"- 已重写 `task_plan`（{plan.title}），当前为第 8 版。" in answer
    assert f"- 已更新 `research_report`（{report.title}），当前为第 2 版。" in answer
    assert "已创建" not in answer


def test_a_denied_read_is_reported_in_chinese(user, demo_model):
    run, asked = _answer_until_done(_turn(user, HEAT_QUESTION_ZH), user, "deny")

    assert run.status == Run.Status.COMPLETED and asked
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert f"### {asked[0]}\n\n无法读取：你拒绝了这次读取。" in report
    answer = run.message.response
    assert "- 没有阅读任何资料。\n" in answer and "已阅读" not in answer
    assert f"- 未阅读：[{HEAT_TITLE_ZH}]({asked[0]})：你拒绝了这次读取。" in answer


def test_a_chinese_question_the_library_does_not_cover_is_said_in_chinese(user, demo_model):
    question = "光合作用是怎样进行的？"

    run = _turn(user, question)

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    nothing = f"团队资料库中没有关于“{question}”的内容：没有文档与之匹配。"
    assert _said_by(run, "search_agent") == nothing
    assert f"- {nothing}因此没有可读的资料，也没有撰写报告。" in run.message.response
    assert not Artifact.objects.filter(artifact_id=REPORT_ID).exists()
    plan = Artifact.objects.get(artifact_id="task_plan").content
    assert plan == (
        f"问题：{question}\n\n- [x] 检索团队资料库：{nothing}\n"
        "- ~~阅读最相关的资料~~：没有可读的资料\n- ~~撰写报告~~：没有可写的内容"
    )


@pytest.mark.parametrize(
    ("question", "title"),
    [
        ("空气源热泵在寒冷天气下效率怎么样？", HEAT_TITLE_ZH),
        ("家用储能电池一般能用几年？", BATTERY_TITLE_ZH),
        ("屋顶分布式光伏一年能发多少电？", SOLAR_TITLE_ZH),
    ],
)
def test_a_chinese_question_finds_a_chinese_sample_document(user, demo_model, question, title):
    run, asked = _answer_until_done(_turn(user, question), user, "approve")

    assert run.status == Run.Status.COMPLETED and asked
    assert _said_by(run, "search_agent").startswith(f"找到的资料：\n\n- [{title}]({asked[0]}#")
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert _headings(report)[:3] == [question, "资料中的相关内容", title]
    assert _han_share(report) > 0.9


# --- A question that compares topics --------------------------------------------------

COMPARE_QUESTION = (
    "Compare heat pumps and solid-state batteries for our lab's energy plan: which should we fund first, "
    "and what are the risks of each?"
)


def _tool_calls(run, tool):
    return [event.data for event in run.events.filter(type=RunEvent.Type.TOOL_START, data__tool=tool)]


def _table(markdown):
    """The rows of the first Markdown table, each a list of its cells."""
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows if "---" not in row]


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        (COMPARE_QUESTION, ["heat pumps", "solid-state batteries"]),
        ("Heat pumps vs. solid-state batteries?", ["Heat pumps", "solid-state batteries"]),
        (
            "What is the difference between heat pumps and solid-state batteries?",
            ["heat pumps", "solid-state batteries"],
        ),
        ("Compare heat pumps with solid-state batteries", ["heat pumps", "solid-state batteries"]),
        (
            "Tell me about heat pumps, solid-state batteries and SQLite WAL mode.",
            ["heat pumps", "solid-state batteries", "SQLite WAL mode"],
        ),
        ("比较空气源热泵和家用储能电池在我们实验室能源规划中的作用", ["空气源热泵", "家用储能电池"]),
        ("空气源热泵与家用储能电池有什么区别？", ["空气源热泵", "家用储能电池"]),
        ("热泵还是储能电池更适合我们实验室？", ["热泵", "储能电池"]),
        ("热泵、储能电池和分布式光伏各有什么特点？", ["热泵", "储能电池", "分布式光伏"]),
        ("比较 heat pumps 和 solid-state batteries", ["heat pumps", "solid-state batteries"]),
        # One subject, though its words have an "and" or a comma.
        (WAL_QUESTION, []),
        ("In WAL mode, how do readers and a writer work at once?", []),
        ("Why are solid-state batteries hard to make?", []),
        ("家用储能电池的容量和寿命怎么选？", []),
        (HEAT_QUESTION_ZH, []),
    ],
)
def test_a_question_is_split_into_the_topics_it_compares(question, topics):
    assert question_topics(question) == topics


@pytest.mark.parametrize(
    ("question", "count"),
    [
        ("Summarise the file I dropped", 1),
        ("Summarise the file I uploaded.", 1),
        ("What does this document say?", 1),
        ("Summarise the files I uploaded", MAX_UPLOADS),
        ("请总结一下我上传的文件", 1),
        ("这些附件都讲了什么？", MAX_UPLOADS),
        ("How do I upload a document to the library?", 0),
        ("Why has the heat pump's COP dropped?", 0),
        ("What's in what I just dropped here?", 1),
        (WAL_QUESTION, 0),
    ],
)
def test_a_question_about_uploads_is_told_by_its_words(question, count):
    assert upload_reference(question) == count


# The inventory's uploads, oldest first: the Word document was uploaded before the notes.
UPLOADS = [
    ("test_plan_热泵.docx", "test_plan_热泵.docx"),
    ("budget-2026.csv", "budget-2026.csv"),
    ("meeting_notes.txt", "meeting_notes.txt"),
]


@pytest.mark.parametrize(
    ("question", "read"),
    [
        # The issue's question: the file named is read, not the newest.
        ("总结 test_plan_热泵.docx 这个文件", ["test_plan_热泵.docx"]),
        ("总结test_plan_热泵这个文件", ["test_plan_热泵.docx"]),
        ("Summarise Meeting_Notes.txt", ["meeting_notes.txt"]),
        ("What do meeting_notes and budget-2026 say?", ["meeting_notes.txt", "budget-2026.csv"]),
        # Naming none: the newest; a plural: several, newest first.
        ("Summarise the file I uploaded", ["meeting_notes.txt"]),
        ("请总结这个文件", ["meeting_notes.txt"]),
        ("总结这些文件", ["meeting_notes.txt", "budget-2026.csv", "test_plan_热泵.docx"]),
        ("所有文件讲了什么？", ["meeting_notes.txt", "budget-2026.csv", "test_plan_热泵.docx"]),
        ("Summarise these files", ["meeting_notes.txt", "budget-2026.csv", "test_plan_热泵.docx"]),
        ("What do all the files say?", ["meeting_notes.txt", "budget-2026.csv", "test_plan_热泵.docx"]),
        # A word that is a file's stem is not its name; a question about no file reads none.
        ("Take notes on heat pumps", []),
        (WAL_QUESTION, []),
    ],
)
def test_a_question_reads_the_uploads_it_names_else_the_newest_or_several(question, read):
    assert [artifact_id for artifact_id, _ in uploads_chosen(question, uploads=UPLOADS)] == read


def test_a_two_topic_question_searches_and_reads_each_and_compares_them_in_a_table(user, demo_model):
    run, asked = _answer_until_done(_turn(user, COMPARE_QUESTION), user, "approve")

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    searches = [call["params"]["query"] for call in _tool_calls(run, "web_search")]
    assert searches == ["heat pumps", "solid-state batteries"]
    assert len(asked) == 2 and len(_tool_calls(run, "web_fetch")) == 2
    heat, battery = asked
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert "offline demo model" in report
    table = _table(report)
    assert table[0] == ["Aspect", "heat pumps", "solid-state batteries"]
    rows = {row[0]: row[1:] for row in table[1:]}
    assert rows["Source"] == [f"[Heat pumps]({heat})", f"[Solid-state batteries]({battery})"]
    assert rows["What it says first"][0] == "A heat pump moves heat instead of producing it."
    assert rows["What it says first"][1].startswith("A solid-state battery replaces the liquid")
    assert "3 kWh of heat" in rows["A figure it gives"][0] and "400–500 Wh/kg" in rows["A figure it gives"][1]
    assert rows["What else it covers"][0] == "Efficiency · Types · Refrigerants"
    # What each source says stays below the table, each with its link.
    assert f"Source: {heat}" in report and f"Source: {battery}" in report
    plan = Artifact.objects.get(artifact_id="task_plan").content
    assert "Topics: heat pumps, solid-state batteries" in plan and plan.count("- [x]") == 3
    answer = run.message.response
    assert answer.startswith("This is the offline demo model")
    assert (
        "- The question names 2 topics; each was searched for on its own: “heat pumps”, “solid-state batteries”."
        in answer
    )
    assert f"- Read: [Heat pumps]({heat}), [Solid-state batteries]({battery}).\n" in answer
    assert "- `research_report` sets what the sources say side by side in a table." in answer


def test_a_chinese_two_topic_question_compares_them_in_a_chinese_table(user, demo_model):
    question = "请比较一下空气源热泵与家用储能电池，哪个更适合我们实验室的能源规划？"

    run, asked = _answer_until_done(_turn(user, question), user, "approve")

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    assert [call["params"]["query"] for call in _tool_calls(run, "web_search")] == ["空气源热泵", "家用储能电池"]
    assert len(asked) == 2
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert _headings(report)[:3] == [question, "对比", "资料中的相关内容"]
    table = _table(report)
    assert table[0] == ["方面", "空气源热泵", "家用储能电池"]
    rows = {row[0]: row[1:] for row in table[1:]}
    assert rows["来源"] == [f"[{HEAT_TITLE_ZH}]({asked[0]})", f"[{BATTERY_TITLE_ZH}]({asked[1]})"]
    assert "3 kWh" in rows["文中的一个数字"][0] and "30%" in rows["文中的一个数字"][1]
    assert "除霜" in rows["还涉及哪些内容"][0] and "LFP" in rows["还涉及哪些内容"][1]
    assert _han_share(report) > 0.9
    answer = run.message.response
    assert answer.startswith("这是离线演示模型：")
    assert "- 问题涉及 2 个主题，逐个分别检索：“空气源热泵”、“家用储能电池”。" in answer
    assert f"- 已阅读：[{HEAT_TITLE_ZH}]({asked[0]})、[{BATTERY_TITLE_ZH}]({asked[1]})。" in answer
    assert _han_share(answer) > 0.9


def test_a_topic_the_library_does_not_cover_has_its_column_say_so(user, demo_model):
    run, asked = _answer_until_done(_turn(user, "Compare heat pumps and photosynthesis"), user, "approve")

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == [] and len(asked) == 1
    rows = {row[0]: row[1:] for row in _table(Artifact.objects.get(artifact_id=REPORT_ID).content)[1:]}
    assert rows["Source"] == [f"[Heat pumps]({asked[0]})", "—"]
    assert rows["What it says first"][1] == "The team library has nothing on it."
    answer = run.message.response
    assert "- The team library has nothing on “photosynthesis”: no document in it matches." in answer
    assert f"- Read: [Heat pumps]({asked[0]}).\n" in answer


def test_a_two_topic_follow_up_adds_its_table_to_the_report(user, demo_model):
    first, _ = _answer_until_done(_turn(user, WAL_QUESTION), user, "approve")
    first_report = Artifact.objects.get(artifact_id=REPORT_ID).content

    run, asked = _answer_until_done(
        _follow_up(first.message.conversation, "Heat pumps vs solid-state batteries"), user, "approve"
    )

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == [] and len(asked) == 2
    report = Artifact.objects.get(artifact_id=REPORT_ID)
    assert report.current_version == 2 and report.content.startswith(first_report.rstrip())
    section = report.content[len(first_report.rstrip()) :]
    assert _table(section)[0] == ["Aspect", "Heat pumps", "solid-state batteries"]


# --- A question about the conversation's uploads --------------------------------------------

UPLOADED_NOTES = (
    "# Lab energy audit 2026\n\n"
    "The lab used 182 MWh of electricity last year, most of it for the freezers and the fume hoods.\n\n"
    "## Heating\n\nThe old gas boiler heats the east wing. It is due for replacement in 2027.\n\n"
    "## Storage\n\nThe roof solar array often exports power at noon. A battery could keep it for the evening.\n"
)


def _conversation_with_upload(user, question, *, filename="energy_audit.md", text=UPLOADED_NOTES):
    conversation = lifecycle.conversation_start(user=user, content=question, enqueue=False)
    upload = artifact_services.artifact_upload(
        branch=branch_shown(conversation=conversation),
        filename=filename,
        data=text.encode(),
        content_type="text/markdown",
    )
    return conversation, upload


@pytest.mark.parametrize("question", ["Summarise the file I uploaded", "Summarise the file I dropped"])
def test_summarise_the_file_i_uploaded_reads_the_upload_and_summarises_it(user, demo_model, question):
    conversation, upload = _conversation_with_upload(user, question)

    run = _execute(conversation.active_branch.runs.get())

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    reads = [call["params"]["id"] for call in _tool_calls(run, "read_artifact")]
    assert reads == [upload.artifact_id]
    # Nothing searched or fetched: the question is about the upload.
    assert not _tool_calls(run, "web_search") and not _tool_calls(run, "call_subagent")
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert "offline demo model" in report and f"(`{upload.artifact_id}`)" in report
    assert "**Outline:** Lab energy audit 2026 · Heating · Storage" in report
    assert "- The lab used 182 MWh of electricity last year" in report
    assert "- The old gas boiler heats the east wing." in report
    plan = Artifact.objects.get(artifact_id="task_plan").content
    assert plan.endswith("- [x] Read the uploaded files\n- [x] Write the report")
    answer = run.message.response
    assert answer.startswith("This is the offline demo model: it quotes your files rather than analysing them.")
    assert f"- Read the upload `{upload.artifact_id}` ({upload.title}) and summarised it in the report." in answer


def test_a_chinese_question_about_the_upload_gets_a_chinese_summary(user, demo_model):
    notes = "# 实验室能耗\n\n去年实验室用电 18 万度。冰箱耗电最多。\n\n## 供暖\n\n东楼的燃气锅炉 2027 年到期。\n"
    conversation, upload = _conversation_with_upload(user, "请总结一下我上传的文件", filename="能耗.md", text=notes)

    run = _execute(conversation.active_branch.runs.get())

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    assert [call["params"]["id"] for call in _tool_calls(run, "read_artifact")] == [upload.artifact_id]
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert "**提纲：** 实验室能耗 · 供暖" in report and "- 去年实验室用电 18 万度。" in report
    answer = run.message.response
    assert (
        answer.startswith("这是离线演示模型：它只摘录你上传的文件")
        and f"已读取上传的文件 `{upload.artifact_id}`" in answer
    )


def test_a_question_naming_an_older_upload_reads_that_one_not_the_newest(user, demo_model):
    plan = docx.Document()
    plan.add_heading("热泵测试计划", level=1)
    plan.add_paragraph("测试在零下十度进行。每台热泵运行两周。")
    data = io.BytesIO()
    plan.save(data)
    conversation = lifecycle.conversation_start(user=user, content="总结 test_plan_热泵.docx 这个文件", enqueue=False)
    branch = branch_shown(conversation=conversation)
    word = artifact_services.artifact_upload(branch=branch, filename="test_plan_热泵.docx", data=data.getvalue())
    artifact_services.artifact_upload(branch=branch, filename="meeting_notes.txt", data="周一开会。".encode())

    run = _execute(conversation.active_branch.runs.get())

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    assert [call["params"]["id"] for call in _tool_calls(run, "read_artifact")] == [word.artifact_id]
    report = Artifact.objects.get(artifact_id=REPORT_ID).content
    assert "测试在零下十度进行。" in report and "周一开会" not in report


def test_a_question_about_an_uploaded_image_says_there_is_no_text_to_read(user, demo_model):
    conversation, _ = _conversation_with_upload(user, "What does the file I dropped say?")
    artifact_services.artifact_upload(
        branch=branch_shown(conversation=conversation),
        filename="plan.png",
        data=b"\x89PNG\r\n\x1a\n",
        content_type="image/png",
    )

    run = _execute(conversation.active_branch.runs.get())

    # The newest upload that is text is the one read: the image has none.
    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == []
    assert [call["params"]["id"] for call in _tool_calls(run, "read_artifact")] == ["energy_audit.md"]


@pytest.mark.parametrize("image", [False, True])
def test_a_question_about_uploads_with_none_says_so(user, demo_model, image):
    conversation = lifecycle.conversation_start(user=user, content="Summarise the file I uploaded", enqueue=False)
    if image:
        artifact_services.artifact_upload(
            branch=branch_shown(conversation=conversation),
            filename="plan.png",
            data=b"\x89PNG\r\n\x1a\n",
            content_type="image/png",
        )

    run = _execute(conversation.active_branch.runs.get())

    assert run.status == Run.Status.COMPLETED
    assert not run.events.filter(type=RunEvent.Type.TOOL_START).exists()
    assert "- This conversation has no uploaded text file to read" in run.message.response
    assert "offline demo model" in run.message.response


def test_the_issues_comparison_asked_in_chinese_reads_the_chinese_documents_on_each(user, demo_model):
    run, asked = _answer_until_done(_turn(user, "比较热泵和固态电池在我们实验室能源规划中的作用"), user, "approve")

    assert run.status == Run.Status.COMPLETED and _failed_tools(run) == [] and len(asked) == 2
    rows = {row[0]: row[1:] for row in _table(Artifact.objects.get(artifact_id=REPORT_ID).content)[1:]}
    assert rows["来源"] == [f"[{HEAT_TITLE_ZH}]({asked[0]})", f"[固态电池：原理、优势与量产难点]({asked[1]})"]
    assert "400–500 Wh/kg" in rows["文中的一个数字"][1]
