"""A scripted OpenAI-compatible embeddings server for tests and benchmarks:
POST /v1/embeddings answers each input with a vector the real `openai` SDK
reads, made on the spot from the text's words, so that texts sharing words lie
near each other. A few words count as one idea (CONCEPTS) the way a real
embeddings model places "loud" near "decibels": by construction, so a test can
ask by meaning what full-text search cannot find. A test may make it fail
after some requests, as a service going down mid-indexing."""

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.local_server import LocalServer

DIMENSIONS = 256
MODEL = "scripted-embeddings"
# Words that name the same idea, in both languages.
CONCEPTS = {
    "loud": "loudness",
    "loudness": "loudness",
    "decibel": "loudness",
    "decibels": "loudness",
    "分贝": "loudness",
    "多大": "loudness",
    "吵": "loudness",
}
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]+")
_COMMON = frozenset("a an the of and to in at is was for on by with from how what does do did".split())


def scripted_embedding(text: str, *, dimensions: int = DIMENSIONS) -> list[float]:
    """A unit vector of the text's words (Latin) and pairs of characters
    (Chinese), or the ideas they name, each in a place its hash chooses: a
    word's weight grows with the log of its count, an idea's counts four
    times, and the commonest English words none, as a model's meaning would."""
    counts: dict[str, int] = {}
    for run in _WORD.findall(text.lower()):
        words = [run] if run.isascii() else [run[i : i + 2] for i in range(max(len(run) - 1, 1))]
        for word in words:
            if word not in _COMMON:
                counts[word] = counts.get(word, 0) + 1
    vector = [0.0] * dimensions
    for word, count in counts.items():
        weight = (1 + math.log(count)) * (4.0 if word in CONCEPTS else 1.0)
        digest = hashlib.blake2b(CONCEPTS.get(word, word).encode(), digest_size=4).digest()
        vector[int.from_bytes(digest[:3], "big") % dimensions] += weight if digest[3] % 2 else -weight
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return [value / norm for value in vector]


@dataclass
class EmbeddingsServer(LocalServer):
    # The inputs of each request answered.
    requests: list[list[str]] = field(default_factory=list)
    # Requests answered before every further one fails with a 503; None: never.
    fail_after: int | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    @property
    def url(self) -> str:
        return f"{self.origin}/v1"

    @property
    def inputs(self) -> int:
        return sum(len(texts) for texts in self.requests)


def _handler_for(server: EmbeddingsServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            if server.fail_after is not None and len(server.requests) >= server.fail_after:
                self._send(503, {"error": {"message": "the embeddings service is down", "type": "server_error"}})
                return
            server.requests.append(texts)
            data = [
                {"object": "embedding", "index": index, "embedding": scripted_embedding(text)}
                for index, text in enumerate(texts)
            ]
            usage = {"prompt_tokens": sum(len(text) for text in texts), "total_tokens": sum(len(t) for t in texts)}
            self._send(200, {"object": "list", "data": data, "model": body.get("model", MODEL), "usage": usage})

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
