"""Model access: the OpenAI SDK against any OpenAI-compatible server, or the
offline demo model when no API key is configured."""

import time
from collections.abc import Iterator
from dataclasses import dataclass

import openai
from django.conf import settings

DEMO_MODEL = "demo"


class ModelError(Exception):
    """The model could not be reached or broke off; the message is shown to the user."""


@dataclass
class Delta:
    content: str = ""
    reasoning: str = ""
    usage: dict | None = None


class OpenAIChatModel:
    demo = False

    def __init__(self, *, api_key: str, base_url: str | None, model: str, timeout: float, max_retries: int):
        self.name = model
        # The SDK retries 408/409/429/5xx and connection errors with backoff
        # before a stream starts; a stream that breaks off is reported.
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def stream(self, messages: list[dict]) -> Iterator[Delta]:
        try:
            stream = self._client.chat.completions.create(
                model=self.name,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            with stream:
                for chunk in stream:
                    yield from _deltas(chunk)
        except openai.APIStatusError as exc:
            raise ModelError(f"The model service answered {exc.status_code}: {_brief(exc.message)}") from exc
        except openai.APITimeoutError as exc:
            raise ModelError("The model service did not answer in time.") from exc
        except openai.APIError as exc:
            raise ModelError(f"The connection to the model service failed: {_brief(exc.message)}") from exc


def _deltas(chunk) -> Iterator[Delta]:
    usage = chunk.usage.model_dump() if getattr(chunk, "usage", None) else None
    if usage:
        yield Delta(usage=usage)
    for choice in chunk.choices or []:
        delta = choice.delta
        if delta is None:
            continue
        # Reasoning models send their thinking beside the answer, under a name
        # that is not part of the OpenAI schema.
        extra = delta.model_extra or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
        if delta.content or reasoning:
            yield Delta(content=delta.content or "", reasoning=reasoning)


def _brief(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


class DemoChatModel:
    """Answers without a network, so a fresh install shows the whole pipeline."""

    name = DEMO_MODEL
    demo = True

    def __init__(self, *, word_delay: float = 0.03):
        self.word_delay = word_delay

    def stream(self, messages: list[dict]) -> Iterator[Delta]:
        question = messages[-1]["content"]
        answer = (
            "**This is the offline demo model.** No `OPENAI_API_KEY` is configured, "
            "so no real model was asked.\n\n"
            f"You asked:\n\n> {' '.join(question.split())[:500]}\n\n"
            "Set `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for a self-hosted, "
            "OpenAI-compatible server) and `ARTIFACTFLOW_MODEL`, then restart, "
            "and the agents will research this for real."
        )
        words = answer.split(" ")
        for i, word in enumerate(words):
            time.sleep(self.word_delay)
            yield Delta(content=word if i == 0 else " " + word)
        yield Delta(usage={"prompt_tokens": 0, "completion_tokens": len(words), "total_tokens": len(words)})


def chat_model_from_settings():
    config = settings.ARTIFACTFLOW_LLM
    if not config["api_key"]:
        return DemoChatModel()
    return OpenAIChatModel(
        api_key=config["api_key"],
        base_url=config["base_url"],
        model=config["model"],
        timeout=config["timeout"],
        max_retries=config["max_retries"],
    )
