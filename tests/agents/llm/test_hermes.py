"""Tool calls a model writes in its text, Hermes-style, when its server has no
tool parser: the prose before them passes, the markup never does, and each
call comes out as a native one."""

import json

import pytest

from agents.llm.hermes import HermesCalls

CALL = {"name": "create_artifact", "arguments": {"id": "notes", "content": "<b>x</b>"}}
TEXT = f"Let me note that.\n<tool_call>\n{json.dumps(CALL)}\n</tool_call>"


@pytest.mark.parametrize("size", [1, 3, 7, len(TEXT)])
def test_prose_passes_and_the_call_comes_out_native_however_the_text_is_cut(size):
    calls = HermesCalls()
    prose = "".join(calls.feed(TEXT[i : i + size]) for i in range(0, len(TEXT), size))
    rest, found = calls.finish()

    assert prose + rest == "Let me note that.\n"
    assert found == [{"id": "call_text_0", "name": "create_artifact", "arguments": json.dumps(CALL["arguments"])}]


def test_two_calls_an_unclosed_one_and_parameters_for_arguments():
    calls = HermesCalls()
    calls.feed(
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>\n<tool_call>{"name": "b", "parameters": {}}'
    )

    assert calls.finish()[1] == [
        {"id": "call_text_0", "name": "a", "arguments": '{"x": 1}'},
        {"id": "call_text_1", "name": "b", "arguments": "{}"},
    ]


def test_a_call_that_is_not_json_is_still_a_call_for_the_engine_to_refuse():
    calls = HermesCalls()
    calls.feed('<tool_call>{"name": "create_artifact", "arguments": {"id": </tool_call>')

    (call,) = calls.finish()[1]
    assert call["name"] == "create_artifact" and call["arguments"] == '{"name": "create_artifact", "arguments": {"id":'


def test_text_without_a_call_is_all_prose_even_ending_like_a_tag():
    calls = HermesCalls()
    shown = calls.feed("a < b and <tool")

    assert shown + calls.finish()[0] == "a < b and <tool" and calls.finish()[1] == []
