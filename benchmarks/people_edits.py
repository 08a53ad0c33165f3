"""What telling the lead about people's edits costs. The lead's system prompt
is built on every one of its model calls; the first of a turn now also finds
the artifacts a person edited since an agent last saved them (one query over
the branch's version numbers, one for the texts of the edited ones) and
compares their lines. Measured on a branch 40 turns deep beside a second
branch at every turn, ten artifacts written at every turn of both (800
versions), three of them 200 KB reports a person then edited: the prompt of
a turn's first call with those edits, against the same branch with no edit of
a person's (the baseline, which is the prompt as it was before)."""

import time

from django.contrib.auth import get_user_model

from agents.config import AGENTS, LEAD_AGENT
from agents.context import system_prompt
from agents.llm.base import XML
from agents.models import Run
from artifacts.branches import branch_at
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from conversations.models import Conversation, Message

TURNS, ARTIFACTS, EDITED = 40, 10, 3
# About 200 KB, every line distinct.
REPORT = "".join(f"- finding {n}: {'words ' * 30}\n" for n in range(1100))
PROMPTS = 30


def _conversation(user, *, edited: bool):
    conversation = Conversation.objects.create(owner=user, title="people's edits")
    session = ArtifactSession.objects.create(conversation=conversation)
    parent, written_at = None, []
    for turn in range(1, TURNS + 1):
        sibling = Message.objects.create(conversation=conversation, parent=parent, content=f"Other question {turn}")
        parent = Message.objects.create(conversation=conversation, parent=parent, content=f"Question {turn}")
        written_at += [parent, sibling]
    for k in range(ARTIFACTS):
        text = REPORT if k < EDITED else f"# Artifact {k}\n"
        versions = [
            ArtifactVersion(version=n, content=text, update_type="update", message=message)
            for n, message in enumerate(written_at, start=1)
        ]
        if edited and k < EDITED:
            note = "".join(f"团队备注 {line}：每晚检查点。\n" for line in range(5))
            versions.append(
                ArtifactVersion(version=len(versions) + 1, content=note + text, update_type="user_edit", message=parent)
            )
        artifact = Artifact.objects.create(session=session, artifact_id=f"artifact_{k}", current_version=len(versions))
        for version in versions:
            version.artifact = artifact
        ArtifactVersion.objects.bulk_create(versions)
    # An agent's versions name the run that wrote them; a person's none.
    run = Run.objects.create(message=parent)
    ArtifactVersion.objects.filter(artifact__session=session).exclude(update_type="user_edit").update(run=run)
    return branch_at(session=session, message_id=parent.pk)


def _prompt_seconds(branch) -> tuple[float, int]:
    config = AGENTS[LEAD_AGENT]
    started = time.perf_counter()
    for _ in range(PROMPTS):
        # A turn's first call: a new manager, which finds the edits once.
        prompt = system_prompt(config=config, artifacts=ArtifactManager(branch=branch), tool_mode=XML)
    return (time.perf_counter() - started) / PROMPTS, len(prompt)


def main():
    user, _ = get_user_model().objects.get_or_create(username="bench-people-edits")
    baseline, baseline_chars = _prompt_seconds(_conversation(user, edited=False))
    edited, edited_chars = _prompt_seconds(_conversation(user, edited=True))
    print(f"the lead's system prompt, {TURNS} turns x 2 branches, {ARTIFACTS} artifacts ({PROMPTS} prompts each):")
    print(f"  no person's edit (baseline):      {baseline * 1000:7.2f} ms, {baseline_chars:,} characters")
    print(f"  {EDITED} reports of 200 KB edited:     {edited * 1000:7.2f} ms, {edited_chars:,} characters")
    print(f"  ratio: {edited / baseline:.2f}x the baseline")
