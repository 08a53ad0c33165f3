"""The scripted model server's own promises: a retried request cannot take the
reply scripted for the next one, and a held stream waits for the test."""

import json
import threading

import httpx

from tests import waits
from tests.model_server import Status, Text

BODY = {"model": "scripted-model", "stream": True, "messages": [{"role": "user", "content": "热泵 heat pumps?"}]}


def _answer(server, *, body=BODY, retry: int = 0) -> str:
    headers = {"X-Stainless-Retry-Count": str(retry)} if retry else {}
    with httpx.stream("POST", f"{server.url}/chat/completions", json=body, headers=headers, timeout=10) as response:
        if response.status_code != 200:
            return f"HTTP {response.status_code}"
        chunks = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
        return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_a_retry_of_an_answered_request_gets_the_same_answer_and_leaves_the_next_reply(model_server):
    model_server.add(Text("First answer."), Text("Second answer."))
    first = _answer(model_server)
    assert first == "First answer."
    # The client gave up on it (a timeout) and asks again: the same answer, the script untouched.
    assert _answer(model_server, retry=1) == first
    follow_up = {**BODY, "messages": [*BODY["messages"], {"role": "user", "content": "更多"}]}
    assert _answer(model_server, body=follow_up) == "Second answer."


def test_a_retry_after_a_scripted_failure_takes_the_next_reply(model_server):
    model_server.add(Status(500), Text("Recovered."))
    assert _answer(model_server) == "HTTP 500"
    assert _answer(model_server, retry=1) == "Recovered."


def test_the_same_request_asked_anew_takes_the_next_reply(model_server):
    # A re-asked question may send what the first asking sent: without the retry header it is a new request.
    model_server.add(Text("One."), Text("Two."))
    assert _answer(model_server) == "One."
    assert _answer(model_server) == "Two."


def test_a_held_stream_sends_what_comes_before_its_hold_and_the_rest_once_released(model_server):
    model_server.add(Text("热泵在寒冷中仍能供暖。Last word: released.", chunk_size=4, hold="Last word"))
    received, done = [], threading.Event()

    def read():
        received.append(_answer(model_server))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    waits.until(lambda: "".join(piece for _, piece in model_server.sent) == "热泵在寒冷中仍能供暖。", timeout=10)
    assert not done.wait(timeout=0.3), "the stream went on before it was released"
    model_server.release()
    assert done.wait(timeout=waits.seconds(10))
    assert received == ["热泵在寒冷中仍能供暖。Last word: released."]


def test_a_reset_lets_a_held_stream_go_on(model_server):
    model_server.add(Text("Before. After.", hold="After"))
    received = []
    reader = threading.Thread(target=lambda: received.append(_answer(model_server)), daemon=True)
    reader.start()
    waits.until(lambda: model_server.sent, timeout=10)
    model_server.reset()
    reader.join(timeout=waits.seconds(10))
    assert received == ["Before. After."]
