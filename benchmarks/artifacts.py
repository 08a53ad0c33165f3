"""Artifacts at real size. A turn that makes ten small edits of a 200 KB
artifact, run for real against a scripted model: the bytes its events and
checkpoints send to the database, against what they were when each carried the
whole working copy (the baseline, rebuilt from the same run's checkpoints). And
the artifact pane of an artifact with 200 versions against one with 2, with
the versions query of before (its foreign key deferred) as the baseline. And
the pane of a branch 40 turns deep, beside a second branch at every turn, with
ten artifacts each written at every turn of both (800 versions), against the
same at one turn (the baseline): what finding each artifact's version on the
branch costs."""

import contextlib
import io
import json
import logging
import time

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import RunEvent
from agents.services.execution import run_execute
from artifacts import selectors
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from conversations import lifecycle
from conversations.models import Conversation, Message
from tests.model_server import ScriptedModelServer, Text

EDITS = 10
# About 200 KB, every line distinct so that each edit matches one place.
LARGE = "".join(f"- [ ] item {n}: {'words ' * 30}\n" for n in range(1100))
PANE_REQUESTS = 50


def _tick(n: int) -> Text:
    return Text(
        "<tool_call><name>update_artifact</name><params><id>report</id>"
        f"<old_str>- [ ] item {n}:</old_str><new_str>- [x] item {n}:</new_str></params></tool_call>"
    )


def _ticked(count: int) -> str:
    text = LARGE
    for n in range(count):
        text = text.replace(f"- [ ] item {n}:", f"- [x] item {n}:")
    return text


def _size(value) -> int:
    return len(json.dumps(value).encode())


def _checkpoint_written(params) -> dict:
    for param in params:
        # psycopg passes a JSONField as a Jsonb wrapper, SQLite as text.
        value = getattr(param, "obj", param)
        if isinstance(value, str) and value.startswith('{"turn"'):
            value = json.loads(value)
        if isinstance(value, dict) and "turn" in value:
            return value
    raise LookupError("an UPDATE of the checkpoint without one")


def _whole_copies(branch, entries: list[dict]) -> list[dict]:
    """A checkpoint's working copies as the old format held them: whole."""
    manager = ArtifactManager(branch=branch)
    manager.restore(entries)
    copies = []
    for entry in entries:
        content = manager.read(artifact_id=entry["artifact_id"])["content"]
        fields = {k: v for k, v in entry.items() if k not in ("base_version", "base_content", "edits")}
        copies.append({**fields, "content": content, "dirty": True})
    return copies


def _edit_turn(user) -> tuple[list[dict], list[RunEvent], object]:
    conversation = lifecycle.conversation_start(user=user, content="Tick the first ten items", enqueue=False)
    seed = ArtifactManager(branch=branch_shown(conversation=conversation))
    seed.create(artifact_id="report", content=LARGE)
    seed.flush_all()
    run = conversation.active_branch.runs.get()
    checkpoints = []

    def capture(execute, sql, params, many, context):
        if sql.startswith('UPDATE "agents_run"') and '"checkpoint"' in sql:
            checkpoints.append(_checkpoint_written(params))
        return execute(sql, params, many, context)

    server = ScriptedModelServer().start()
    server.add(*(_tick(n) for n in range(EDITS)), Text("Ticked ten."))
    llm = {"api_key": "sk-bench", "base_url": server.url, "model": server.model, "timeout": 10.0, "max_retries": 0}
    # Quiet: a log line per model request, and a traceback from the scripted
    # server's thread when the SDK drops a finished keep-alive connection.
    logging.disable(logging.INFO)
    try:
        with (
            override_settings(ARTIFACTFLOW_LLM=llm),
            connection.execute_wrapper(capture),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            run_execute(run_id=run.pk)
    finally:
        server.stop()
        logging.disable(logging.NOTSET)
    assert (
        Artifact.objects.get(session=conversation.artifact_session, artifact_id="report").current_version == EDITS + 1
    )
    return checkpoints, list(run.events.order_by("seq")), branch_shown(conversation=conversation)


def _with_snapshot(data: dict, content: str) -> dict:
    """A tool_complete as it was: the whole text where it now has a change summary."""
    change = data["artifact_change"]
    snapshot = {
        "artifact_id": change["artifact_id"],
        "title": change["title"],
        "content_type": "text/markdown",
        "content": content,
        "version": change["version"],
        "source": "agent",
    }
    return {**{k: v for k, v in data.items() if k != "artifact_change"}, "artifact_snapshot": snapshot}


def _bytes_written(user) -> None:
    checkpoints, events, branch = _edit_turn(user)
    new_checkpoints = sum(_size(c) for c in checkpoints)
    old_checkpoints = sum(_size({**c, "artifacts": _whole_copies(branch, c["artifacts"])}) for c in checkpoints)
    new_events = sum(_size(e.data) for e in events)
    edits = [e.data for e in events if "artifact_change" in e.data]
    old_events = new_events + sum(
        _size(_with_snapshot(data, _ticked(k + 1))) - _size(data) for k, data in enumerate(edits)
    )
    old, new = old_checkpoints + old_events, new_checkpoints + new_events
    print(
        f"{EDITS} small edits of a {len(LARGE) / 1000:.0f} KB artifact, one turn ({len(checkpoints)} checkpoints, {len(events)} events):"
    )
    print(
        f"  whole working copies (baseline): {old_checkpoints / 1000:8.1f} KB checkpoints + {old_events / 1000:7.1f} KB events = {old / 1000:8.1f} KB"
    )
    print(
        f"  base version and splices:        {new_checkpoints / 1000:8.1f} KB checkpoints + {new_events / 1000:7.1f} KB events = {new / 1000:8.1f} KB"
    )
    print(f"  ratio: {old / new:.0f}x fewer bytes")


def _with_versions(user, count: int) -> str:
    conversation = lifecycle.conversation_start(user=user, content=f"{count} versions", enqueue=False)
    artifact = Artifact.objects.create(
        session=conversation.artifact_session,
        artifact_id="report",
        content=f"# Report v{count}\n",
        current_version=count,
    )
    ArtifactVersion.objects.bulk_create(
        ArtifactVersion(artifact=artifact, version=n, content=f"# Report v{n}\n", update_type="update")
        for n in range(1, count + 1)
    )
    return reverse("artifact-detail", args=[conversation.pk, "report"])


def _pane(client, url) -> tuple[int, float]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200
    # Read before the next request empties the connection's query log.
    queries = len(captured)
    started = time.perf_counter()
    for _ in range(PANE_REQUESTS):
        client.get(url, HTTP_HX_REQUEST="true")
    return queries, (time.perf_counter() - started) / PANE_REQUESTS


def _deferred_fk_versions(*, artifact, branch):
    versions = list(artifact.versions.order_by("-version").only("version", "update_type", "created_at", "message"))
    for version in versions:
        version.on_branch, version.where = branch.holds(version), ""
        version.name = selectors.VersionName(number=version.version, ordinal=None)
    return versions


def _pane_at_size(user) -> None:
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    small_url, large_url = _with_versions(user, 2), _with_versions(user, 200)
    small, large = _pane(client, small_url), _pane(client, large_url)
    fixed = selectors.artifact_versions
    selectors.artifact_versions = _deferred_fk_versions
    try:
        deferred = _pane(client, large_url)
    finally:
        selectors.artifact_versions = fixed
    print(f"the artifact pane showing an artifact ({PANE_REQUESTS} requests each):")
    for label, (queries, seconds) in (
        ("200 versions, foreign key deferred (baseline)", deferred),
        ("2 versions", small),
        ("200 versions", large),
    ):
        print(f"  {label + ':':46} {queries:4d} queries, {seconds * 1000:6.2f} ms a pane")
    print(
        f"  ratio: {deferred[1] / large[1]:.1f}x faster at 200 versions, which cost {large[1] / small[1]:.1f}x 2 (the template's option lists)"
    )


BRANCH_ARTIFACTS = 10


def _branched(user, *, turns: int) -> str:
    """A thread of `turns` turns with a sibling beside each, every artifact
    written at every message of both; the page shows the first branch."""
    conversation = Conversation.objects.create(owner=user, title=f"{turns} turns on two branches")
    session = ArtifactSession.objects.create(conversation=conversation)
    parent, written_at = None, []
    for turn in range(1, turns + 1):
        sibling = Message.objects.create(conversation=conversation, parent=parent, content=f"Other question {turn}")
        parent = Message.objects.create(conversation=conversation, parent=parent, content=f"Question {turn}")
        written_at += [parent, sibling]
    conversation.active_branch = parent
    conversation.save(update_fields=["active_branch"])
    for k in range(BRANCH_ARTIFACTS):
        artifact = Artifact.objects.create(
            session=session, artifact_id=f"artifact_{k}", current_version=len(written_at)
        )
        ArtifactVersion.objects.bulk_create(
            ArtifactVersion(
                artifact=artifact, version=n, content=f"# Artifact {k} v{n}\n", update_type="update", message=message
            )
            for n, message in enumerate(written_at, start=1)
        )
    return reverse("artifact-pane", args=[conversation.pk])


def _pane_on_branches(user) -> None:
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    small, large = _pane(client, _branched(user, turns=1)), _pane(client, _branched(user, turns=40))
    print(f"the artifact pane of a branch, {BRANCH_ARTIFACTS} artifacts ({PANE_REQUESTS} requests each):")
    for label, (queries, seconds) in (
        ("1 turn, 2 branches, 20 versions (baseline)", small),
        ("40 turns, 2 branches, 800 versions", large),
    ):
        print(f"  {label + ':':46} {queries:4d} queries, {seconds * 1000:6.2f} ms a pane")
    print(f"  ratio: {large[1] / small[1]:.2f}x the baseline")


def main():
    user, _ = get_user_model().objects.get_or_create(username="bench-artifacts")
    _bytes_written(user)
    _pane_at_size(user)
    _pane_on_branches(user)
