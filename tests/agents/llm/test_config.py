"""Model settings: the environment's default, per-agent models from a file,
and the lead models people choose from."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from agents.llm.config import (
    Price,
    lead_choices_from_settings,
    models_file_read,
    models_from_settings,
    prices_from_settings,
)
from agents.llm.demo import DemoChatModel
from agents.llm.openai_model import ModelSettings
from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from conversations import lifecycle
from tests.agents.test_engine import call
from tests.conftest import LEAD_MODELS
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

    file = models_file_read(
        path, default=ModelSettings(model="big", api_key="k"), environ={"SMALL_MODEL_KEY": "secret"}
    )

    small = file.models["small"].settings
    assert (small.model, small.api_key, small.context_window, small.tool_mode, small.temperature) == (
        "small-model",
        "secret",
        32768,
        "native",
        0.2,
    )
    assert file.agents == {"search_agent": "small"}
    # Without a label people see its name; without choices there is nothing to pick.
    assert (file.models["small"].label, file.models["small"].thinking) == ("small", False)
    assert (file.lead_choices, file.lead_default) == ((), "")


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
        conversation = lifecycle.conversation_start(user=user, content="Find it", enqueue=False)
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
    conversation = lifecycle.conversation_start(user=user, content="Hi", enqueue=False)
    run = conversation.active_branch.runs.get()

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "Cannot read the models file" in run.error


def _read(text: str):
    return models_file_read(_written(text), default=ModelSettings(model="env-model", api_key="k"), environ={})


def _written(text: str):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "models.toml"
    path.write_text(text)
    return path


def test_the_lead_choices_their_labels_and_the_default_are_read():
    file = _read(LEAD_MODELS)

    assert file.lead_choices == ("deep", "fast")
    deep, fast = file.models["deep"], file.models["fast"]
    assert (deep.label, deep.thinking, deep.settings.model) == ("深度思考 Deep", True, "deep-model")
    assert (fast.label, fast.thinking, fast.settings.model) == ("快速 Fast", False, "fast-model")
    # [agents] lead_agent is the default; without it, the first choice.
    assert file.lead_default == "deep"
    assert (
        _read(
            LEAD_MODELS.replace('lead_agent = "deep"\n', "").replace('["deep", "fast"]', '["fast", "deep"]')
        ).lead_default
        == "fast"
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (('label = "快速 Fast"', 'label = " "'), "'fast': label must be a text that is not empty"),
        (("thinking = true", 'thinking = "yes"'), "'deep': thinking must be true or false"),
        (
            ('["deep", "fast"]', '["deep", "fast", "huge"]'),
            "choices name models .* does not define: huge. It defines fast, deep",
        ),
        (('["deep", "fast"]', '"deep"'), "choices .* must be a list of model names"),
        (('["deep", "fast"]', '["deep", "fast", "deep"]'), "name a model twice"),
        (('["deep", "fast"]', '["fast"]'), "gives the lead model 'deep', which is not among its \\[lead\\] choices"),
        (("choices =", "default = 'deep'\nchoices ="), "\\[lead\\] table .* unknown settings: default"),
    ],
)
def test_a_wrong_lead_choice_is_refused_with_the_reason(change, problem):
    with pytest.raises(ImproperlyConfigured, match=problem):
        _read(LEAD_MODELS.replace(*change))


@pytest.mark.parametrize(
    ("chosen", "lead"),
    [("fast", "fast-model"), ("deep", "deep-model"), ("", "deep-model"), ("removed-since", "deep-model")],
)
def test_the_lead_gets_the_chosen_model_or_the_default_and_the_subagents_theirs(lead_models, chosen, lead):
    models = models_from_settings(lead=chosen)

    assert models.for_agent("lead_agent").name == lead
    assert models.lead_label == {"fast-model": "快速 Fast", "deep-model": "深度思考 Deep"}[lead]
    assert models.for_agent("search_agent").name == models.for_agent("crawl_agent").name == "fast-model"


def test_the_choices_offered_are_the_files_and_none_with_the_demo_model_or_a_broken_file(lead_models, settings):
    choices, default = lead_choices_from_settings()
    assert ([choice.name for choice in choices], default) == (["deep", "fast"], "deep")

    settings.MODELS_FILE = str(lead_models.with_name("missing.toml"))
    assert lead_choices_from_settings() == ([], "")

    settings.MODELS_FILE = str(lead_models)
    settings.ARTIFACTFLOW_LLM = {**settings.ARTIFACTFLOW_LLM, "api_key": ""}
    assert lead_choices_from_settings() == ([], "")
    assert isinstance(models_from_settings(lead="fast").default, DemoChatModel)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("chosen", "lead", "label"),
    [
        ("fast", "fast-model", "快速 Fast"),
        ("", "deep-model", "深度思考 Deep"),
        ("removed-since", "deep-model", "深度思考 Deep"),
    ],
)
def test_a_turn_asks_the_lead_model_the_conversation_chose(user, lead_models, scripted_model, chosen, lead, label):
    """Through the worker's path: the model service sees the chosen model's
    name for every lead call, the subagents' calls go to theirs, and the run
    keeps which model answered. A choice the file no longer offers gets the default."""
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="查找热泵的资料")),
        Text("搜索结果：热泵很高效。"),
        Text("热泵的效率很高。"),
    )
    conversation = lifecycle.conversation_start(user=user, content="热泵的效率如何？", enqueue=False)
    conversation.lead_model = chosen
    conversation.save()
    run = conversation.active_branch.runs.get()
    run.lead_model = chosen
    run.save()

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert [r["model"] for r in scripted_model.requests] == [lead, "fast-model", lead]
    assert (run.model, run.model_label) == (lead, label)
    start = run.events.get(type=RunEvent.Type.METADATA).data
    assert (start["model"], start["model_label"]) == (lead, label)


def test_prices_are_read_per_million_tokens_with_cached_at_the_input_price_unless_given(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(
        'currency = "CNY"\n[prices."deep-model"]\ninput = 20\noutput = 80.5\ncached = 2\n'
        '[prices."fast-model"]\ninput = 1.5\noutput = 3\n'
    )

    file = models_file_read(path, default=ModelSettings(model="big", api_key="k"), environ={})

    assert file.currency == "CNY"
    assert file.prices["deep-model"] == Price(input=20.0, output=80.5, cached=2.0)
    assert file.prices["fast-model"] == Price(input=1.5, output=3.0, cached=1.5)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[prices."m"]\ninput = -1\n', "input .* must be a price"),
        ('[prices."m"]\ninput = "cheap"\n', "input .* must be a price"),
        ('[prices."m"]\ninput = 1\nsurcharge = 2\n', "unknown settings: surcharge"),
        ("prices = { m = 3 }\n", "must be a table"),
        ("currency = 978\n", "currency"),
    ],
)
def test_a_wrong_price_is_refused_with_the_reason(tmp_path, text, problem):
    path = tmp_path / "models.toml"
    path.write_text(text)

    with pytest.raises(ImproperlyConfigured, match=problem):
        models_file_read(path, default=ModelSettings(model="big", api_key="k"), environ={})


def test_a_broken_models_file_gives_no_prices_rather_than_breaking_the_usage_page(settings, tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[prices."m"]\ninput = -1\n')
    settings.MODELS_FILE = str(path)

    assert prices_from_settings() == ({}, "")
