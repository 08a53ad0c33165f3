"""Inline <think> text split off an answer as it streams, wherever the pieces break."""

import pytest

from agents.llm.think import ThinkSplitter


def _split(pieces: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    reasoning, content = [], []
    for piece in pieces:
        thought, said = splitter.feed(piece)
        reasoning.append(thought)
        content.append(said)
    thought, said = splitter.finish()
    return "".join(reasoning) + thought, "".join(content) + said


def _cuts(text: str):
    """The text in two pieces, cut at every position, and in one-character pieces."""
    for at in range(len(text) + 1):
        yield [text[:at], text[at:]]
    yield list(text)


ANSWER = "\n  <think>先查一下 WAL 的定义。\nThen compare.</think>\n\nWAL 是预写日志。"


@pytest.mark.parametrize("pieces", list(_cuts(ANSWER)))
def test_a_leading_think_block_is_reasoning_wherever_the_pieces_break(pieces):
    assert _split(pieces) == ("先查一下 WAL 的定义。\nThen compare.", "WAL 是预写日志。")


@pytest.mark.parametrize("pieces", list(_cuts("WAL 是预写日志。")))
def test_an_answer_without_thinking_is_all_content(pieces):
    assert _split(pieces) == ("", "WAL 是预写日志。")


@pytest.mark.parametrize("pieces", list(_cuts("The tag <think>x</think> is how R1 marks thinking.")))
def test_a_think_tag_later_in_prose_is_prose(pieces):
    assert _split(pieces) == ("", "The tag <think>x</think> is how R1 marks thinking.")


@pytest.mark.parametrize("pieces", list(_cuts("<think>还在想，流就断了 </thi")))
def test_thinking_left_open_at_the_end_of_the_stream_is_reasoning(pieces):
    assert _split(pieces) == ("还在想，流就断了 </thi", "")


def test_prose_is_handed_on_as_soon_as_it_cannot_be_a_think_tag():
    splitter = ThinkSplitter()

    assert splitter.feed("  <th") == ("", "")
    assert splitter.feed("e answer") == ("", "  <the answer")


def test_thinking_is_handed_on_as_it_comes_holding_back_only_a_possible_closing_tag():
    splitter = ThinkSplitter()

    assert splitter.feed("<think>一步一步 <") == ("一步一步 ", "")
    assert splitter.feed("/thin") == ("", "")
    assert splitter.feed("king it over") == ("</thinking it over", "")
    assert splitter.feed("</think>\n") == ("", "")
    assert splitter.feed("\n答案") == ("", "答案")
    assert splitter.finish() == ("", "")


def test_a_blank_answer_stays_content():
    assert _split(["  ", "\n"]) == ("", "  \n")
