"""How soon Stop ends a turn: from `run_cancel` to the run's terminal event,
through the real run service, the openai SDK and the scripted model server.

Three moments: while the answer streams (the baseline: the engine checks as
tokens arrive), while a thinking model is silent before its first token, and
while the context is being summarised by a model that is silent as long. The
silent model would answer after SILENCE seconds; before the model stream was
read apart from the engine, Stop waited all of it.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import statistics
import threading
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections

from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.services.runs import run_cancel
from conversations import lifecycle
from tests.model_server import ScriptedModelServer, Text

SILENCE = 30
REPEATS = 5
SUMMARY = "\n\n".join(f"## {n}. Section\nWhat was done." for n in range(1, 8))
LONG_CREATE = (
    "<tool_call><name>create_artifact</name><params><id>notes</id>"
    f"<content>{'WAL notes. ' * 3000}</content></params></tool_call>"
)


def _user():
    return get_user_model().objects.get_or_create(username="bench-stop")[0]


def _stop_latency(server: ScriptedModelServer, moment: str) -> float:
    user = _user()
    if moment == "streaming":
        server.add(Text("word " * 2000, chunk_size=5, delay=0.01))
    elif moment == "thinking":
        server.add(Text("An answer at last.", wait=SILENCE))
    else:
        server.add(
            Text(LONG_CREATE, chunk_size=4000),
            Text(SUMMARY, wait=SILENCE),
        )
    conversation = lifecycle.conversation_start(user=user, content="stop benchmark", enqueue=False)
    run = conversation.active_branch.runs.get()
    waiting_for = {
        "streaming": RunEvent.Type.LLM_CHUNK,
        "thinking": RunEvent.Type.AGENT_START,
        "compaction": RunEvent.Type.COMPACTION_START,
    }[moment]

    def execute():
        try:
            run_execute(run_id=run.pk)
        finally:
            connections.close_all()

    worker = threading.Thread(target=execute)
    worker.start()
    while not run.events.filter(type=waiting_for).exists():
        time.sleep(0.01)
    if moment == "thinking":
        time.sleep(1)  # well inside the silence
    asked = time.monotonic()
    run_cancel(run_id=run.pk, user=user)
    while not Run.objects.filter(pk=run.pk, status=Run.Status.CANCELLED).exists():
        time.sleep(0.005)
    latency = time.monotonic() - asked
    worker.join()
    server.requests.clear()
    return latency


def main() -> None:
    server = ScriptedModelServer().start()
    settings.ARTIFACTFLOW_LLM = {
        "api_key": "sk-bench",
        "base_url": server.url,
        "model": server.model,
        "timeout": 120.0,
        "max_retries": 0,
        "context_window": 10_000,
    }
    settings.COMPACTION_THRESHOLD = 0.7
    settings.RUN_CHUNK_FLUSH_SECONDS = 0.05
    medians = {}
    for moment in ("streaming", "thinking", "compaction"):
        medians[moment] = statistics.median(_stop_latency(server, moment) for _ in range(REPEATS))
    server.stop()
    base = medians["streaming"]
    print(f"Stop → turn ended, median of {REPEATS}, a model silent for {SILENCE} s:")
    for moment, latency in medians.items():
        print(f"  {moment:<11} {latency * 1000:5.0f} ms  ({latency / base:.2f}× the streaming baseline)")


if __name__ == "__main__":
    main()
