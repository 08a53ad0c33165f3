"""The scripted model server's own promise: a retried request cannot take the
reply scripted for the next one."""

import json

import httpx

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
