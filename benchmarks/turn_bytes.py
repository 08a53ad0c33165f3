"""What a turn keeps in the database once folded, beyond its answer (issue 49's
goal: at most 10 KB), for answers of three kinds:

- stamped: the load benchmark's (benchmarks/load.py) 800 tokens, each a
  distinct number, which no prose resembles: every token is a new word of the
  search index, the worst case;
- English and Chinese: the library's sample documents of that language
  (library/samples) in one report, about 2,300 and 4,300 tokens, as a team's
  answers are; each turn's report takes them in another order.

Each turn runs through the real engine (run_execute) with the scripted model
answering over HTTP, then the turns are folded as retention folds them
(runs_fold). Printed per kind: the rows' stored bytes per turn, measured as
the load benchmark measures them (load.stored_bytes: the full-text index
included), the answer's own bytes, and the rest. The first turn of a kind is also measured
alone: it pays for every word of its own in the index, as an answer on a new
subject does.

    python benchmarks/turn_bytes.py              (also part of `make bench`)
    DATABASE_URL=postgres://… python benchmarks/turn_bytes.py
"""

import logging
from datetime import timedelta
from pathlib import Path

if __name__ == "__main__":
    from setup_django import setup

    setup()

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from load import TOKENS, TOKENS_PER_SECOND, stamped, stored_bytes

from agents.services.execution import run_execute
from agents.services.retention import runs_fold
from conversations import lifecycle
from tests.model_server import ScriptedModelServer, Text

TURNS = 10
SAMPLES = Path(__file__).resolve().parents[1] / "library" / "samples"


def _query(sql: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


def _answers() -> dict[str, list[str]]:
    # Timed as the load benchmark's model sends them.
    stamps = [
        " ".join(stamped(1796044508501 + 1000 // TOKENS_PER_SECOND * token + turn, token) for token in range(TOKENS))
        for turn in range(TURNS)
    ]
    english = sorted(path.read_text() for path in SAMPLES.glob("*.md") if not path.stem.endswith("_zh"))
    chinese = sorted(path.read_text() for path in SAMPLES.glob("*_zh.md"))

    def reports(documents: list[str]) -> list[str]:
        return [
            "\n\n".join(documents[turn % len(documents) :] + documents[: turn % len(documents)])
            for turn in range(TURNS)
        ]

    return {"stamped": stamps, "English": reports(english), "Chinese": reports(chinese)}


def _turns(server: ScriptedModelServer, answers: list[str], *, kind: str) -> None:
    user = get_user_model().objects.get_or_create(username=f"bench-bytes-{kind}")[0]
    for answer in answers:
        server.add(Text(answer, chunk_size=64))
        conversation = lifecycle.conversation_start(user=user, content=f"A report on {kind}, please.", enqueue=False)
        run_execute(run_id=conversation.active_branch.runs.get().pk)
    runs_fold(finished_before=timezone.now() + timedelta(seconds=1))


def main() -> None:
    server = ScriptedModelServer().start()
    settings.ARTIFACTFLOW_LLM = {
        "api_key": "sk-bench",
        "base_url": server.url,
        "model": "scripted-model",
        "timeout": 60.0,
        "max_retries": 0,
    }
    settings.MODEL_TITLES = False
    # The model client (the openai SDK's httpx) would log every call.
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    vendor = connection.vendor
    print(f"what a turn keeps once folded ({vendor}), KB per turn: all rows / the answer / the rest")
    try:
        for kind, answers in _answers().items():
            results = []
            for turns in (answers[:1], answers[1:]):
                before = stored_bytes(_query, vendor=vendor)
                _turns(server, turns, kind=kind)
                after = stored_bytes(_query, vendor=vendor)
                stored, answer = ((now - then) / len(turns) / 1024 for now, then in zip(after, before, strict=True))
                results.append(f"{stored:5.1f} / {answer:5.1f} / {stored - answer:5.1f}")
            print(f"  {kind:8} first alone: {results[0]}   the next {TURNS - 1}, each: {results[1]}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
