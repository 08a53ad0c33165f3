"""Text to vectors through the embeddings endpoint of an OpenAI-compatible
service (settings.EMBEDDINGS), with the `openai` SDK as the chat model uses it."""

import functools
import math

from django.conf import settings
from openai import OpenAI, OpenAIError

# One request's texts at most: services cap a request at 2,048 inputs, some far lower.
BATCH_MAX = 64


class EmbeddingsError(Exception):
    """The service could not be asked, or answered with no usable vectors."""


def embeddings_configured() -> bool:
    return bool(settings.EMBEDDINGS["model"])


@functools.cache
def _client(*, api_key: str, base_url: str | None, timeout: float) -> OpenAI:
    # One a process for each service: making one costs a search some 20 ms.
    return OpenAI(api_key=api_key or "not-needed", base_url=base_url, timeout=timeout, max_retries=1)


def embeddings_create(texts: list[str]) -> list[list[float]]:
    """A vector for each text, in their order, all of one length."""
    config = settings.EMBEDDINGS
    client = _client(api_key=config["api_key"], base_url=config["base_url"], timeout=config["timeout"])
    try:
        response = client.embeddings.create(model=config["model"], input=texts, encoding_format="float")
    except OpenAIError as error:
        raise EmbeddingsError(f"the embeddings service failed: {error}") from None
    vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
    lengths = {len(vector) for vector in vectors}
    if len(vectors) != len(texts) or len(lengths) != 1 or 0 in lengths:
        raise EmbeddingsError(f"the embeddings service sent {len(vectors)} vectors of lengths {sorted(lengths)}")
    if not all(math.isfinite(value) for vector in vectors for value in vector):
        raise EmbeddingsError("the embeddings service sent a vector with a value that is not a number")
    return vectors
