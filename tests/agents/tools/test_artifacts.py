import pytest

from agents.tokens import tokens_estimate, tokens_prefix
from agents.tools.artifacts import (
    ARTIFACT_TOOLS,
    create_artifact,
    read_artifact,
    rewrite_artifact,
    update_artifact,
)
from artifacts.branches import branch_at
from artifacts.manager import ArtifactManager
from tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager():
    return ArtifactManager(branch=branch_at(session=ConversationFactory().artifact_session, message_id=None))


def test_create_answers_in_compact_xml_and_tells_the_page_what_changed(manager):
    result = create_artifact(manager, id="task_plan", content="- [ ] a", title="Plan")
    assert result.success
    assert result.content == '<artifact version="1"><id>task_plan</id>Created.</artifact>'
    assert result.metadata == {
        "artifact_change": {
            "artifact_id": "task_plan",
            "title": "Plan",
            "version": 1,
            "length": 7,
            "removed": 0,
            "added": 7,
        }
    }
    assert result.output == {"kind": "artifact", "artifact_id": "task_plan", "title": "Plan", "version": 1}
    assert result.notes == []


def test_an_edit_of_a_large_artifact_reports_its_size_not_its_text(manager):
    create_artifact(manager, id="report", content="x" * 200_000 + "\nend of draft\n")
    updated = update_artifact(manager, id="report", old_str="end of draft", new_str="end")
    rewritten = rewrite_artifact(manager, id="report", content="short")

    assert updated.metadata["artifact_change"] == {
        "artifact_id": "report",
        "title": "report",
        "version": 2,
        "length": 200_005,
        "removed": 12,
        "added": 3,
    }
    assert rewritten.metadata["artifact_change"] == {
        "artifact_id": "report",
        "title": "report",
        "version": 3,
        "length": 5,
        "removed": 200_005,
        "added": 5,
    }


def test_create_of_an_existing_id_is_an_error_the_model_can_act_on(manager):
    create_artifact(manager, id="task_plan", content="x")
    result = create_artifact(manager, id="task_plan", content="y")
    assert not result.success
    assert result.content.startswith('<error tool="create_artifact"><id>task_plan</id>')
    assert "update_artifact" in result.content


def test_update_reports_the_layer_that_matched(manager):
    create_artifact(manager, id="notes", content="He said “hello” to the team — twice.")
    exact = update_artifact(manager, id="notes", old_str="to the team", new_str="to everyone")
    normalized = update_artifact(manager, id="notes", old_str='said "hello"', new_str='said "hi"')

    assert exact.success and 'layer="exact"' in exact.content and 'version="2"' in exact.content
    assert normalized.success and 'layer="normalized"' in normalized.content
    assert 'said "hi" to everyone' in manager.read(artifact_id="notes")["content"]


def test_a_failed_update_says_why(manager):
    create_artifact(manager, id="notes", content="alpha\nalpha\n")
    result = update_artifact(manager, id="notes", old_str="alpha", new_str="beta")
    assert not result.success
    assert "<message>" in result.content and "2" in result.content
    assert result.output["kind"] == "error" and "2" in result.output["message"]


def test_rewrite_and_read_escape_the_content(manager):
    create_artifact(manager, id="page.html", content="old", content_type="text/html")
    rewrite_artifact(manager, id="page.html", content="<b>&</b>")
    result = read_artifact(manager, id="page.html")
    assert result.content == (
        '<artifact id="page.html" version="2" content_type="text/html" title="page.html">'
        "<content>&lt;b&gt;&amp;&lt;/b&gt;</content></artifact>"
    )
    assert result.output == {"kind": "artifact", "artifact_id": "page.html", "title": "page.html", "version": 2}


def _numbered(count: int) -> str:
    # 50 characters a line: 4,000 lines make 200,000 characters.
    return "".join(f"line {n:05d} " + "x" * 38 + "\n" for n in range(1, count + 1))


@pytest.fixture
def spilled(manager, settings):
    settings.TOOL_RESULT_MAX_CHARS = 20_000
    create_artifact(manager, id="tool_result", content=_numbered(4000))
    return manager


def _content(result) -> str:
    # The numbered lines have nothing XML escapes.
    return result.content.split("<content>", 1)[1].split("</content>", 1)[0]


def test_without_a_range_a_large_artifact_comes_cut_with_a_note_on_how_to_read_on(spilled):
    result = read_artifact(spilled, id="tool_result")

    assert result.success
    assert 'chars="0-20000" of="200000">' in result.content
    assert _content(result) == _numbered(4000)[:20_000]
    assert result.content.endswith(
        "<note>This is characters 0-20000; the artifact has 200000 characters, 4000 lines, and one read returns at most 20000 characters. "
        "Read on with offset=20000 and limit=20000, or by lines with start_line and end_line.</note></artifact>"
    )


def test_a_large_artifact_is_paged_by_characters(spilled):
    text = _numbered(4000)

    middle = read_artifact(spilled, id="tool_result", offset=100_000, limit=50)
    last = read_artifact(spilled, id="tool_result", offset=190_000, limit=50_000)

    assert 'chars="100000-100050" of="200000">' in middle.content
    assert _content(middle) == text[100_000:100_050] == "line 02001 " + "x" * 38 + "\n"
    assert "Read on with offset=100050" in middle.content
    assert 'chars="190000-200000" of="200000">' in last.content
    assert _content(last) == text[190_000:] and "<note>" not in last.content


def test_a_large_artifact_is_paged_by_lines_never_more_than_one_read(spilled):
    text = _numbered(4000).splitlines(keepends=True)

    asked = read_artifact(spilled, id="tool_result", start_line=121, end_line=240)
    too_many = read_artifact(spilled, id="tool_result", start_line=1001)
    to_the_end = read_artifact(spilled, id="tool_result", start_line=3900, end_line=5000)

    assert 'lines="121-240" of="4000">' in asked.content
    assert _content(asked) == "".join(text[120:240])
    assert "Read on with start_line=241." in asked.content
    # 400 lines of 50 characters fill one read.
    assert 'lines="1001-1400" of="4000">' in too_many.content
    assert _content(too_many) == "".join(text[1000:1400])
    assert (
        "This is lines 1001-1400; the artifact has 200000 characters, 4000 lines. Read on with start_line=1401."
        in too_many.content
    )
    assert 'lines="3900-4000" of="4000">' in to_the_end.content and "<note>" not in to_the_end.content


@pytest.mark.parametrize(
    "params, message",
    [
        ({"start_line": 4001}, "start_line 4001 is beyond the end: the artifact has 200000 characters, 4000 lines."),
        ({"start_line": 0}, "Lines are numbered from 1."),
        ({"start_line": 5, "end_line": -1}, "Lines are numbered from 1."),
        ({"start_line": 10, "end_line": 9}, "end_line 9 is before start_line 10."),
        ({"offset": -1}, "offset cannot be negative."),
        ({"offset": 200_000}, "offset 200000 is beyond the end: the artifact has 200000 characters, 4000 lines."),
        ({"offset": 0, "limit": 0}, "limit must be at least 1."),
        (
            {"start_line": 1, "limit": 10},
            "Give a range in lines (start_line, end_line) or in characters (offset, limit), not both.",
        ),
    ],
)
def test_an_impossible_range_is_an_error_the_model_can_correct(spilled, params, message):
    result = read_artifact(spilled, id="tool_result", **params)

    assert not result.success
    assert result.content == f'<error tool="read_artifact"><id>tool_result</id><message>{message}</message></error>'


def test_a_line_longer_than_one_read_is_to_be_read_in_characters(manager, settings):
    settings.TOOL_RESULT_MAX_CHARS = 100
    create_artifact(manager, id="minified.js", content="short\n" + "x" * 500 + "\n")

    result = read_artifact(manager, id="minified.js", start_line=2)

    assert not result.success
    assert (
        "Line 2 alone is longer than one read (100 characters); read it in characters: offset=6, limit=100."
        in result.content
    )


# 30 characters a line, a token each but the newline: 1,000 lines make 30,000 characters, about 29,000 tokens.
CHINESE_LINE = "预写日志让读者与写者互不阻塞，检查点把日志写回数据库。\n"


def test_a_chinese_artifact_is_read_a_part_of_at_most_the_token_limit(manager, settings):
    settings.TOOL_RESULT_MAX_CHARS, settings.TOOL_RESULT_MAX_TOKENS = 20_000, 5_000
    text = "".join(f"{n:04d}{CHINESE_LINE}" for n in range(1000))
    create_artifact(manager, id="网页", content=text)

    whole = read_artifact(manager, id="网页")
    by_lines = read_artifact(manager, id="网页", start_line=1)
    next_part = read_artifact(manager, id="网页", offset=5_000, limit=20_000)

    assert _content(whole) == tokens_prefix(text=text, tokens=5_000) and len(_content(whole)) > 4_900
    assert 'chars="0-' in whole.content and "one read returns at most 5000 tokens" in whole.content
    assert tokens_estimate(text=_content(by_lines)) <= 5_000 and _content(by_lines).endswith("\n")
    assert text.startswith(_content(by_lines)) and text[len(_content(by_lines)) :].startswith("0")
    assert tokens_estimate(text=_content(next_part)) <= 5_000 and text[5_000:].startswith(_content(next_part))


def test_a_chinese_line_longer_than_one_reads_tokens_is_to_be_read_in_characters(manager, settings):
    settings.TOOL_RESULT_MAX_CHARS, settings.TOOL_RESULT_MAX_TOKENS = 20_000, 5_000
    create_artifact(manager, id="网页", content="标题\n" + CHINESE_LINE.strip() * 300 + "\n")

    result = read_artifact(manager, id="网页", start_line=2)

    assert not result.success
    assert "Line 2 alone is longer than one read (5000 tokens (about a character each in Chinese" in result.content
    assert "read it in characters: offset=3, limit=20000." in result.content


def test_every_tool_has_a_schema_naming_its_required_arguments():
    names = {tool.name for tool in ARTIFACT_TOOLS}
    assert names == {"create_artifact", "update_artifact", "rewrite_artifact", "read_artifact"}
    for tool in ARTIFACT_TOOLS:
        assert set(tool.parameters["required"]) <= set(tool.parameters["properties"])
        assert tool.permission == "auto"
