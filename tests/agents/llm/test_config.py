"""Model settings: the environment's default, and per-agent models from a file."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from agents.llm.config import models_file_read
from agents.llm.openai_model import ModelSettings
from agents.models import Run
from agents.services import asking
from agents.services.runs import run_execute
from tests.model_server import ScriptedModelServer, Text

MODELS = """
[models.small]
base_url = "{url}"
model = "small-model"
api_key_env = "SMALL_MODEL_KEY"
context_window = 32768
tool_mode = "native"
temperature = 0.2

[agents]
search_agent = "small"
"""


def test_a_models_file_gives_an_agent_its_own_model_with_the_key_from_the_environment(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(MODELS.format(url="http://127.0.0.1:9/v1"))

    models, agents = models_file_read(
        path, default=ModelSettings(model="big", api_key="k"), environ={"SMALL_MODEL_KEY": "secret"}
    )

    small = models["small"]
    assert (small.model, small.api_key, small.context_window, small.tool_mode, small.temperature) == (
        "small-model",
        "secret",
        32768,
        "native",
        0.2,
    )
    assert agents == {"search_agent": "small"}


@pytest.mark.parametrize(
    ("text", "environ", "problem"),
    [
        (MODELS, {}, "SMALL_MODEL_KEY"),
        (
            MODELS.replace("temperature", "api_key = 'inline'\ntemperature"),
            {"SMALL_MODEL_KEY": "s"},
            "unknown settings: api_key",
        ),
        (MODELS.replace('tool_mode = "native"', 'tool_mode = "smoke"'), {"SMALL_MODEL_KEY": "s"}, "tool_mode"),
        (MODELS.replace('search_agent = "small"', 'search_agent = "large"'), {"SMALL_MODEL_KEY": "s"}, "'large'"),
        ("[models.small\n", {}, "Cannot read"),
    ],
)
def test_a_wrong_models_file_is_refused_with_the_reason(tmp_path, text, environ, problem):
    path = tmp_path / "models.toml"
    path.write_text(text.format(url="http://x/v1") if "{url}" in text else text)

    with pytest.raises(ImproperlyConfigured, match=problem):
        models_file_read(path, default=ModelSettings(model="big", api_key="k"), environ=environ)


@pytest.mark.django_db
def test_each_agent_talks_to_its_own_model(user, scripted_model, settings, tmp_path, monkeypatch):
    small = ScriptedModelServer(model="small-model").start()
    try:
        path = tmp_path / "models.toml"
        path.write_text(MODELS.format(url=small.url).replace('tool_mode = "native"', 'tool_mode = "xml"'))
        settings.MODELS_FILE = str(path)
        monkeypatch.setenv("SMALL_MODEL_KEY", "secret")
        scripted_model.add(
            Text(
                "<tool_call><name>call_subagent</name><params><agent>search_agent</agent>"
                "<instruction>find it</instruction></params></tool_call>"
            ),
            Text("The lead's answer."),
        )
        small.add(Text("The search agent's report."))
        conversation = asking.conversation_start(user=user, content="Find it", enqueue=False)
        run = conversation.active_branch.runs.get()

        run_execute(run_id=run.pk)

        run.refresh_from_db()
        assert run.status == Run.Status.COMPLETED
        assert len(small.requests) == 1 and small.requests[0]["model"] == "small-model"
        assert small.requests[0]["temperature"] == 0.2
        assert [r["model"] for r in scripted_model.requests] == [scripted_model.model] * 2
        models = {entry["agent_name"]: entry["model"] for entry in run.metrics["agent_executions"]}
        assert models == {"lead_agent": scripted_model.model, "search_agent": "small-model"}
    finally:
        small.stop()


@pytest.mark.django_db
def test_a_broken_models_file_fails_the_turn_with_the_reason(user, scripted_model, settings, tmp_path):
    settings.MODELS_FILE = str(tmp_path / "missing.toml")
    conversation = asking.conversation_start(user=user, content="Hi", enqueue=False)
    run = conversation.active_branch.runs.get()

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "Cannot read the models file" in run.error
