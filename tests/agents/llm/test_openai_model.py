"""The OpenAI-compatible model's stream: one that ends before the model
finished its answer is asked again, and a model error once retries run out."""

import pytest

from agents.llm.base import ModelError
from agents.llm.openai_model import ModelSettings, OpenAIChatModel
from tests.model_server import Text, Truncated


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
