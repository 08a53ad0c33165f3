from agents.toolcalls import text_before_calls, toolcalls_describe, toolcalls_parse
from agents.tools.artifacts import ARTIFACT_TOOLS

SCHEMAS = {tool.name: tool.parameters for tool in ARTIFACT_TOOLS}


def test_a_call_with_markdown_values_is_read_verbatim():
    text = """I'll tick the step.
<tool_call>
  <name>update_artifact</name>
  <params>
    <id>task_plan</id>
    <old_str>- [ ] search <b>now</b></old_str>
    <new_str>- [x] search <b>now</b></new_str>
  </params>
</tool_call>"""
    [call] = toolcalls_parse(text, schemas=SCHEMAS)
    assert not call.error
    assert call.params == {
        "id": "task_plan",
        "old_str": "- [ ] search <b>now</b>",
        "new_str": "- [x] search <b>now</b>",
    }
    assert text_before_calls(text) == "I'll tick the step."


def test_a_value_on_its_own_lines_keeps_its_inner_layout_and_cdata_protects_closing_tags():
    text = """<tool_call><name>create_artifact</name><params><id>notes</id>
<content>
# Notes

    indented code
</content>
<title><![CDATA[About </title> tags]]></title></params></tool_call>"""
    [call] = toolcalls_parse(text, schemas=SCHEMAS)
    assert call.params["content"] == "# Notes\n\n    indented code"
    assert call.params["title"] == "About </title> tags"


def test_integers_are_converted_and_bad_ones_explained():
    good, bad = toolcalls_parse(
        "<tool_call><name>read_artifact</name><params><id>a</id><version> 3 </version></params></tool_call>"
        "<tool_call><name>read_artifact</name><params><id>a</id><version>three</version></params></tool_call>",
        schemas=SCHEMAS,
    )
    assert good.params == {"id": "a", "version": 3} and not good.error
    assert "whole number" in bad.error


def test_missing_parameters_and_unknown_tools_are_errors_the_model_can_fix():
    missing, unknown = toolcalls_parse(
        "<tool_call><name>update_artifact</name><params><id>a</id></params></tool_call>"
        "<tool_call><name>delete_everything</name></tool_call>",
        schemas=SCHEMAS,
    )
    assert "old_str, new_str" in missing.error
    assert "no tool 'delete_everything'" in unknown.error and "create_artifact" in unknown.error


def test_an_unterminated_call_is_still_a_call_and_plain_text_has_none():
    [call] = toolcalls_parse("<tool_call><name>read_artifact</name><params><id>x</id></params>", schemas=SCHEMAS)
    assert call.params == {"id": "x"}
    assert toolcalls_parse("A plain answer mentioning <name>tags</name>.", schemas=SCHEMAS) == []


def test_the_description_lists_every_tool_and_its_parameters():
    text = toolcalls_describe(ARTIFACT_TOOLS)
    for tool in ARTIFACT_TOOLS:
        assert f"## {tool.name}" in text
    assert "- `old_str` (string, required)" in text
    assert "- `version` (integer, optional)" in text
