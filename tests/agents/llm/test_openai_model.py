"""The OpenAI-compatible model's stream: one that ends before the model
finished its answer is asked again, and a model error once retries run out."""

import pytest

from agents.llm.base import ModelError
from agents.llm.openai_model import ModelSettings, OpenAIChatModel
from tests.model_server import Status, Text, Truncated


def _model(server, **settings):
    return OpenAIChatModel(ModelSettings(model=server.model, api_key="k", base_url=server.url, **settings))


@pytest.mark.parametrize("cut", ["", "Half an ans"])
def test_a_stream_that_ends_cleanly_without_a_finish_reason_is_asked_again(model_server, cut):
    model_server.add(Truncated(cut), Text("A whole answer."))

    deltas = list(_model(model_server).stream([{"role": "user", "content": "Hi"}]))

    assert [d.restart for d in deltas if d.restart] == ["the stream ended before the answer was finished"]
    restart = next(i for i, d in enumerate(deltas) if d.restart)
    assert "".join(d.content for d in deltas[restart + 1 :]) == "A whole answer."
    assert len(model_server.requests) == 2


def test_a_stream_that_keeps_ending_early_is_a_model_error(model_server):
    model_server.add(Truncated("Half"), Truncated("Half"))

    with pytest.raises(ModelError, match="the stream ended before the answer was finished"):
        list(_model(model_server, max_retries=1).stream([{"role": "user", "content": "Hi"}]))
    assert len(model_server.requests) == 2


KEY = "sk-live-0123456789abcdefghij"


@pytest.mark.parametrize(
    "echoed",
    [
        f"Authorization: Bearer {KEY}",
        f'{{"headers": {{"authorization": "Bearer {KEY}"}}}}',
        f"proxy-authorization=Basic {KEY}",
        f"upstream https://user:{KEY}@proxy.internal/v1 refused",
        f"x-api-key: {KEY}; password=hunter2-{KEY}",
        f"key {KEY} is not valid",
        f"bearer {KEY[::-1]}",
        f"api_key='sk-other-{'9' * 20}' rejected",
    ],
)
def test_secrets_a_service_echoes_in_an_error_never_reach_the_person(model_server, echoed):
    """A proxy that echoed Authorization showed the key to whoever asked."""
    model_server.add(Status(502, f"bad gateway; 研究 request was: {echoed}"))
    model = OpenAIChatModel(
        ModelSettings(model=model_server.model, api_key=KEY, base_url=model_server.url, max_retries=0)
    )

    with pytest.raises(ModelError) as error:
        list(model.stream([{"role": "user", "content": "Hi"}]))

    message = str(error.value)
    assert message.startswith("The model service answered 502: ") and "研究 request was:" in message
    assert "[redacted]" in message
    for secret in (KEY, KEY[::-1], "9" * 20, "hunter2"):
        assert secret not in message


def _said(deltas) -> tuple[str, str]:
    return "".join(d.reasoning for d in deltas), "".join(d.content for d in deltas)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_thinking_streamed_beside_the_answer_is_reasoning_under_either_name(model_server, field):
    model_server.add(Text("WAL 是预写日志。", reasoning="先想想 WAL 是什么。" * 5, reasoning_field=field, chunk_size=4))

    deltas = list(_model(model_server).stream([{"role": "user", "content": "WAL?"}]))

    assert _said(deltas) == ("先想想 WAL 是什么。" * 5, "WAL 是预写日志。")
    # As it comes, not in one piece at the end.
    assert len([d for d in deltas if d.reasoning]) > 5


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 50])
def test_inline_think_text_is_reasoning_and_not_the_answer(model_server, chunk_size):
    model_server.add(Text("<think>用户问 WAL。\n先定义。</think>\n\nWAL 是预写日志。", chunk_size=chunk_size))

    deltas = list(_model(model_server).stream([{"role": "user", "content": "WAL?"}]))

    assert _said(deltas) == ("用户问 WAL。\n先定义。", "WAL 是预写日志。")


def test_a_stream_asked_again_mid_think_tag_starts_its_thinking_afresh(model_server):
    model_server.add(
        Truncated("<think>半个想法 </thi", chunk_size=3), Text("<think>整个想法</think>答案", chunk_size=3)
    )

    deltas = list(_model(model_server).stream([{"role": "user", "content": "Hi"}]))

    restart = next(i for i, d in enumerate(deltas) if d.restart)
    assert _said(deltas[restart + 1 :]) == ("整个想法", "答案")
