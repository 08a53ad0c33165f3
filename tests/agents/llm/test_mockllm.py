"""The OpenAI-compatible client against a server we did not write: mockllm
(a FastAPI server that answers from a responses file) in a process of its own,
through the real SDK, and a whole turn through the run service."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from agents.llm.openai_model import ModelSettings, OpenAIChatModel
from agents.models import Run
from agents.services.execution import run_execute
from conversations import lifecycle
from tests import waits

pytestmark = pytest.mark.processes

pytest.importorskip("mockllm", reason="mockllm is in the test extra: pip install -e '.[test]'")

STARTUP_TIMEOUT = waits.seconds(30)
MODEL = "gpt-4o-mini"
ANSWERS = {
    "What does WAL mode change?": "In WAL mode readers do not block the writer, and the writer does not block readers.",
    "预写日志模式改变了什么？": "在预写日志模式下，读者不阻塞写者，写者也不阻塞读者。",
}


def _responses(answers: dict) -> dict:
    """mockllm's responses file, mapping a prompt (the last user message) to its answer.
    Its streaming path (0.0.8) looks the answer up once more as if it were a
    prompt and streams what that finds, the default for an answer that is no
    key: so each answer maps to itself too. A prompt it does not know still
    streams the default, which no test expects."""
    return {
        "responses": {**answers, **{answer: answer for answer in answers.values()}},
        "defaults": {"unknown_response": "mockllm did not know this prompt."},
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="module")
def mockllm(tmp_path_factory):
    """mockllm on a free port, answering ANSWERS; yields its /v1 URL."""
    directory = tmp_path_factory.mktemp("mockllm")
    responses, log = directory / "responses.yml", directory / "mockllm.log"
    # JSON is YAML, and ASCII with \u escapes reads the same whatever the locale.
    responses.write_text(json.dumps(_responses(ANSWERS)))
    port = _free_port()
    env = {
        **os.environ,
        "MOCKLLM_RESPONSES_FILE": str(responses),
        # Only the streaming path is used, which counts no tokens; were tiktoken
        # to reach for its encodings anyway, it fails at once instead of downloading.
        "TIKTOKEN_CACHE_DIR": str(directory / "tiktoken"),
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    command = [sys.executable, "-m", "uvicorn", "mockllm.server:app", "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_until_it_answers(url=f"http://127.0.0.1:{port}/providers", process=process, log=log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_until_it_answers(*, url: str, process: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mockllm exited during startup ({process.returncode})\n{_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                # Its own listing of providers: not some other server on the port.
                if "openai" in json.loads(response.read()):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"mockllm did not answer within {STARTUP_TIMEOUT:.0f} s\n{_tail(log)}")


@pytest.mark.parametrize("prompt", ANSWERS)
def test_the_client_streams_a_whole_answer_from_mockllm(mockllm, prompt):
    model = OpenAIChatModel(ModelSettings(model=MODEL, api_key="sk-test", base_url=mockllm, max_retries=0))

    deltas = list(model.stream([{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": prompt}]))

    # It streams a character at a time and ends with a finish reason: nothing asked again.
    assert not [d.restart for d in deltas if d.restart]
    assert "".join(d.content for d in deltas) == ANSWERS[prompt]


@pytest.mark.django_db
@pytest.mark.parametrize("prompt", ANSWERS)
def test_a_whole_turn_against_mockllm_completes_with_its_answer(mockllm, user, settings, prompt):
    settings.ARTIFACTFLOW_LLM = {
        **settings.ARTIFACTFLOW_LLM,
        "api_key": "sk-test",
        "base_url": mockllm,
        "model": MODEL,
        "timeout": 10.0,
        "max_retries": 0,
    }
    conversation = lifecycle.conversation_start(user=user, content=prompt, enqueue=False)
    run = conversation.active_branch.runs.get()

    run_execute(run_id=run.pk)

    run.refresh_from_db()
    # mockllm sends no usage: the engine goes by its own estimate and the turn is none the worse.
    assert run.error == "" and run.status == Run.Status.COMPLETED
    assert run.message.response == ANSWERS[prompt]
