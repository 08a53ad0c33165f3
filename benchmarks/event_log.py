"""Writing a streamed answer to the event log: coalesced chunks against a row
(and an announcement) per token, on the same simulated token stream."""

import time

from django.contrib.auth import get_user_model

from agents.events import RunEventLog
from conversations import lifecycle

TOKENS = 2000
TOKEN_INTERVAL = 0.002  # 500 tokens/s, a fast model


def _write(flush_seconds: float) -> tuple[float, int]:
    user, _ = get_user_model().objects.get_or_create(username="bench")
    conversation = lifecycle.conversation_start(user=user, content="benchmark", enqueue=False)
    run = conversation.active_branch.runs.get()
    log = RunEventLog(run=run, flush_seconds=flush_seconds)
    spent = 0.0
    for i in range(TOKENS):
        time.sleep(TOKEN_INTERVAL)  # the model producing the next token
        started = time.perf_counter()
        log.chunk(agent="lead_agent", content=f" tok{i}")
        spent += time.perf_counter() - started
    started = time.perf_counter()
    log.flush_chunks()
    spent += time.perf_counter() - started
    return spent, run.events.count()


def main():
    from django.conf import settings

    per_token, per_token_rows = _write(0.0)
    coalesced, coalesced_rows = _write(settings.RUN_CHUNK_FLUSH_SECONDS)
    print(f"event log, {TOKENS} tokens at {1 / TOKEN_INTERVAL:.0f}/s ({settings.DATABASES['default']['ENGINE']}):")
    print(f"  a row per token (baseline): {per_token * 1000:8.1f} ms writing, {per_token_rows} rows")
    print(
        f"  coalesced every {settings.RUN_CHUNK_FLUSH_SECONDS}s:     {coalesced * 1000:8.1f} ms writing, {coalesced_rows} rows"
    )
    print(f"  ratio: {per_token / coalesced:.1f}x less time, {per_token_rows / coalesced_rows:.1f}x fewer rows")
