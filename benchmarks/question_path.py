"""A posted question's path through the code (issue 48): the modules the
request passes through, in order, from the composer's POST to its response.

Every call while the test client posts a question, as the page does, into a
conversation whose last turn has ended, is traced (sys.setprofile). A call
from one app module into another is a step of the path: library frames
(Django, the ORM, templates, signals) and the project's shared helpers
(artifactflow.*, accounts.*, which any layer uses) are transparent, so a call
counts from the app module below them. Reported:

- stays: the modules entered, one per step (the view first), and how many of
  them were entered by reading an attribute rather than by a call the code
  writes (a property, read by code or by the response's template, or a
  dataclass field's default): a reader following the code by its calls
  makes the others;
- modules: how many distinct modules those are;
- climbs: steps into a module of a higher layer than the caller's (the layer
  contract `apps-one-way` in pyproject.toml, as this checkout has it), with
  how many of them are signal receivers (live's, which announce a change);
- returns: stays in a module the path had already been in.

Runs on its own (`python benchmarks/question_path.py`, `--stays` to list
them), or from benchmarks/run.py.
"""

if __name__ == "__main__":
    from setup_django import setup

    setup()

import dis
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from agents.models import Run
from conversations import lifecycle
from conversations.models import Conversation

ROOT = Path(__file__).resolve().parents[1]
# Not app code, or helpers every layer uses (the contract `project-base`).
TRANSPARENT = ("tests", "benchmarks", ".venv", "artifactflow", "accounts")


def _layers() -> list[list[str]]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c["id"] == "apps-one-way")
    return [[name.strip() for name in layer.replace("|", ":").split(":")] for layer in contract["layers"]]


def _rank(module: str, layers: list[list[str]]) -> int:
    """0 for the top layer; the bottom for what the contract does not name."""
    for rank, names in enumerate(layers):
        if any(module == name or module.startswith(name + ".") for name in names):
            return rank
    return len(layers)


def _module(filename: str, cache: dict) -> str | None:
    """The app module a file is, or None for libraries, tests and shared helpers."""
    if filename not in cache:
        path = Path(filename)
        module = None
        if path.suffix == ".py" and path.is_relative_to(ROOT):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[0] not in TRANSPARENT:
                module = ".".join(part for part in parts if part != "__init__")
        cache[filename] = module
    return cache[filename]


class Step(NamedTuple):
    module: str
    caller: str | None
    # Entered by reading an attribute, not by a call the code writes: a
    # property (the response's template reading what it shows, or code
    # reading `run.is_active`) or a dataclass field's default.
    read: bool


def _opcode(frame) -> str:
    """The instruction a frame is at: LOAD_ATTR while it reads an attribute."""
    for instruction in dis.get_instructions(frame.f_code):
        if instruction.offset == frame.f_lasti:
            return instruction.opname
    return ""


def _read(frame) -> bool:
    caller = frame.f_back
    if caller is None:
        return False
    # A dataclass's __init__ is generated code: it calls a field's default factory.
    if caller.f_code.co_filename == "<string>" or _opcode(caller) == "LOAD_ATTR":
        return True
    for _ in range(3):
        if "/django/template/" in caller.f_code.co_filename:
            return True
        caller = caller.f_back
        if caller is None:
            return False
    return False


def question_path(*, client: Client, conversation: Conversation, question: str) -> list[Step]:
    """The steps of posting `question`."""
    cache: dict = {}
    frames: dict = {}
    steps: list[Step] = []

    def profile(frame, event, _arg):
        if event == "call":
            caller = frames.get(id(frame.f_back)) if frame.f_back else None
            module = _module(frame.f_code.co_filename, cache)
            if module and module != caller:
                steps.append(Step(module, caller, _read(frame)))
            frames[id(frame)] = module or caller
        elif event == "return":
            frames.pop(id(frame), None)

    url = reverse("message-create", args=[conversation.pk])
    data = {"content": question, "after": str(conversation.active_branch_id)}
    sys.setprofile(profile)
    try:
        response = client.post(url, data, headers={"HX-Request": "true"})
    finally:
        sys.setprofile(None)
    assert response.status_code == 200, response.status_code
    return steps


def path_figures(steps: list[Step]) -> dict:
    layers = _layers()
    climbs = [step for step in steps if step.caller and _rank(step.module, layers) < _rank(step.caller, layers)]
    seen: set = set()
    returns = 0
    for step in steps:
        returns += step.module in seen
        seen.add(step.module)
    return {
        "stays": len(steps),
        "reads": sum(step.read for step in steps),
        "calls": sum(not step.read for step in steps),
        "modules": len(seen),
        "climbs": len(climbs),
        "receivers": sum(step.module.endswith(".signals") for step in climbs),
        "returns": returns,
    }


def main():
    user, _ = get_user_model().objects.get_or_create(username="question-path")
    client = Client(headers={"Host": "localhost"})
    client.force_login(user)
    conversation = lifecycle.conversation_start(user=user, content="What is SQLite's WAL?", enqueue=False)
    Run.objects.filter(message__conversation=conversation).update(status=Run.Status.COMPLETED)
    # Once, so what is imported or cached on a first request is not on the path.
    question_path(client=client, conversation=conversation, question="And its checkpoints?")
    Run.objects.filter(message__conversation=conversation).update(status=Run.Status.COMPLETED)
    conversation.refresh_from_db()

    steps = question_path(client=client, conversation=conversation, question="何时会阻塞写入？")
    figures = path_figures(steps)
    print(
        "a posted question's path: {stays} stays ({calls} by calls, {reads} by reading a property) "
        "in {modules} modules, {climbs} climbs up a layer ({receivers} of them signal receivers), "
        "{returns} returns to a module already visited".format(**figures)
    )
    if "--stays" in sys.argv:
        layers = _layers()
        for step in steps:
            layer = f"layer {_rank(step.caller or '', layers)} → {_rank(step.module, layers)}"
            print(f"  {step.caller} → {step.module} ({layer}){' (read)' if step.read else ''}")


if __name__ == "__main__":
    main()
