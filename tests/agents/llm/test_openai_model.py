"""The OpenAI-compatible model's stream: one that ends before the model
finished its answer is asked again, a model error once retries run out, and a
request refused for its length told apart from other refusals."""

import json
import os

import pytest

from agents.config import LEAD
from agents.llm.base import ContextOverflow, ModelError
from agents.llm.openai_model import ModelSettings, OpenAIChatModel
from tests.model_server import Status, StreamError, Text, ToolCalls, Truncated


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


# How each service refuses a request longer than its model's context.
REFUSED_FOR_LENGTH = {
    "OpenAI": Status(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. "
        "Please reduce the length of the messages.",
        error_code="context_length_exceeded",
        error_type="invalid_request_error",
    ),
    "OpenAI, by its code alone": Status(
        400, "Your input exceeds what this model accepts.", error_code="context_length_exceeded"
    ),
    "vLLM": Status(
        400,
        body={
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5012 tokens "
            "(5012 in the messages, 0 in the completion). Please reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "vLLM, newer": Status(
        400,
        "The decoder prompt (length 5012) is longer than the maximum model length of 4096. "
        "Make sure that `max_model_len` is no smaller than the number of text tokens.",
        error_type="BadRequestError",
    ),
    "llama.cpp server": Status(
        400,
        body={
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
    ),
    "Ollama": Status(400, "the input length exceeds the context length", error_type="api_error"),
    "Ollama, a bare string": Status(400, body={"error": "the input length exceeds the context length"}),
    "a service that says so plainly": Status(400, "context length exceeded", error_type="api_error"),
    "LiteLLM proxy": Status(
        400,
        body={
            "error": {
                "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: 超出上下文 - upstream said no",
                "type": None,
                "param": None,
                "code": "400",
            }
        },
    ),
    "Anthropic": Status(
        400,
        body={
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 209303 tokens > 200000 maximum"},
        },
    ),
    "a proxy's body limit": Status(
        413, body="<html><head><title>413 Request Entity Too Large</title></head><body>nginx</body></html>"
    ),
}


@pytest.mark.parametrize("refusal", REFUSED_FOR_LENGTH.values(), ids=REFUSED_FOR_LENGTH.keys())
def test_a_request_refused_for_its_length_is_a_context_overflow(model_server, refusal):
    model_server.add(refusal)

    with pytest.raises(ContextOverflow) as error:
        list(_model(model_server, max_retries=0).stream([{"role": "user", "content": "研究 WAL"}]))

    assert str(error.value).startswith("The model service refused the request as longer than the model's context: ")
    assert len(model_server.requests) == 1


def test_the_scripted_servers_own_window_refuses_as_openai_does(model_server):
    model_server.context_window = 10

    with pytest.raises(ContextOverflow, match="maximum context length is 10 tokens"):
        list(_model(model_server, max_retries=0).stream([{"role": "user", "content": "预写日志" * 20}]))


# Refusals that asking again with less context would not mend.
REFUSED_OTHERWISE = {
    "a bad request": Status(400, "bad request"),
    "a tool schema": Status(
        400,
        "Invalid schema for function 'web_search': In context=('properties', 'query'), 'type' is required.",
        error_type="invalid_request_error",
    ),
    "a content policy": Status(
        400,
        "Your request was rejected as a result of our safety system. 请求内容不合规。",
        error_code="content_policy_violation",
        error_type="invalid_request_error",
    ),
    "a wrong key": Status(401, "Incorrect API key provided.", error_code="invalid_api_key"),
    "an unknown model": Status(404, "The model `gpt-9` does not exist.", error_code="model_not_found"),
    "a rate limit counted in tokens": Status(
        429,
        "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000. "
        "The input or output tokens must be reduced in order to run successfully.",
        error_code="rate_limit_exceeded",
    ),
    "a broken service": Status(503, "The engine is currently overloaded."),
}


@pytest.mark.parametrize("refusal", REFUSED_OTHERWISE.values(), ids=REFUSED_OTHERWISE.keys())
def test_other_refusals_are_plain_model_errors(model_server, refusal):
    model_server.add(refusal)

    with pytest.raises(ModelError) as error:
        list(_model(model_server, max_retries=0).stream([{"role": "user", "content": "研究 WAL"}]))

    assert not isinstance(error.value, ContextOverflow)
    assert str(error.value).startswith(f"The model service answered {refusal.code}: ")


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


def test_a_process_builds_one_client_per_model_and_a_forked_worker_builds_its_own(model_server):
    """Building a client loads the system's certificates: once per model and process, not per turn."""
    client = _model(model_server)._client

    assert _model(model_server)._client is client
    assert _model(model_server, timeout=61.0)._client is not client
    child = os.fork()
    if child == 0:
        # A django-q2 cluster forks its workers: none may use its parent's connections.
        os._exit(0 if _model(model_server)._client is not client else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# --- stream shapes of other services (docs/models.md) ---------------------------


def _native(server):
    return _model(server, tool_mode="native"), LEAD.tools


def test_chunks_without_choices_and_empty_deltas_are_skipped(model_server):
    """Azure's prompt filter results and content-filter verdicts."""
    model_server.add(Text("An answer, filtered.", reasoning="Thought.", filter_chunks=True, chunk_size=3))

    deltas = list(_model(model_server).stream([{"role": "user", "content": "Hi"}]))

    assert "".join(d.content for d in deltas) == "An answer, filtered."
    assert "".join(d.reasoning for d in deltas) == "Thought."
    assert next(d.usage for d in deltas if d.usage)["completion_tokens"] > 0


def test_chunks_of_shapes_no_service_should_send_carry_nothing_and_break_nothing(model_server):
    model_server.add(Text("An answer among odd chunks.", odd_chunks=True, chunk_size=4))

    deltas = list(_model(model_server).stream([{"role": "user", "content": "Hi"}]))

    assert "".join(d.content for d in deltas) == "An answer among odd chunks."
    assert not any(d.tool_calls for d in deltas)
    assert [d.usage["completion_tokens"] for d in deltas if d.usage] == [7]


def test_parallel_calls_interleaved_by_index_come_out_whole_in_order(model_server):
    model, tools = _native(model_server)
    calls = [("create_artifact", {"id": "a", "content": "x" * 30}), ("read_artifact", {"id": "b"})]
    model_server.add(ToolCalls(calls, interleaved=True, chunk_size=5))

    deltas = list(model.stream([{"role": "user", "content": "Hi"}], tools=tools))

    (called,) = [d.tool_calls for d in deltas if d.tool_calls]
    assert [(c["name"], json.loads(c["arguments"])) for c in called] == calls


def test_calls_written_in_the_text_are_native_calls_when_tools_were_offered(model_server):
    model, tools = _native(model_server)
    call = {"name": "create_artifact", "arguments": {"id": "a", "content": "x"}}
    model_server.add(
        Text(f"<think>Plan.</think>\n\nNoting.\n<tool_call>\n{json.dumps(call)}\n</tool_call>", chunk_size=4)
    )

    deltas = list(model.stream([{"role": "user", "content": "Hi"}], tools=tools))

    assert "".join(d.content for d in deltas) == "Noting.\n"
    assert "".join(d.reasoning for d in deltas) == "Plan."
    (called,) = [d.tool_calls for d in deltas if d.tool_calls]
    assert called == [{"id": "call_text_0", "name": "create_artifact", "arguments": json.dumps(call["arguments"])}]


def test_without_tools_offered_the_text_is_left_as_it_is(model_server):
    model_server.add(Text("<tool_call><name>x</name></tool_call>"))

    deltas = list(_model(model_server).stream([{"role": "user", "content": "Hi"}]))

    assert "".join(d.content for d in deltas) == "<tool_call><name>x</name></tool_call>"


def test_a_call_cut_at_the_output_limit_is_not_run_but_an_error(model_server):
    model, tools = _native(model_server)
    model_server.add(ToolCalls([("create_artifact", {"id": "a", "content": "x" * 60})], length_cut=20))

    with pytest.raises(ModelError, match="output limit in the middle of a tool call"):
        list(model.stream([{"role": "user", "content": "Hi"}], tools=tools))
    assert len(model_server.requests) == 1


def test_an_answer_cut_at_the_output_limit_is_kept(model_server):
    # Cut where a call would begin: the text came, the call never did.
    model_server.add(ToolCalls([("read_artifact", {"id": "a"})], content="An answer cut short", length_cut=0))

    deltas = list(_model(model_server).stream([{"role": "user", "content": "Hi"}]))

    assert "".join(d.content for d in deltas) == "An answer cut short"


def test_an_error_event_mid_stream_is_a_model_error_in_the_services_words_not_asked_again(model_server):
    model_server.add(StreamError("Half an answer", message="upstream provider overloaded"), Text("unused"))

    with pytest.raises(ModelError, match="in the middle of its answer: upstream provider overloaded"):
        list(_model(model_server).stream([{"role": "user", "content": "Hi"}]))
    assert len(model_server.requests) == 1
