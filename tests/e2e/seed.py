"""Data the browser tests need at a size no test should type in: run inside
the portal's process environment through `Portal.shell`."""

from django.contrib.auth import get_user_model

from agents.models import Run
from artifacts.models import Artifact, ArtifactSession
from artifacts.services import artifact_version_save
from conversations.models import Conversation, Message

PARAGRAPH = " ".join(["Air-source heat pumps keep a useful coefficient of performance well below freezing."] * 5)


def long_conversation(*, username: str, turns: int, answer: str = "", question: str = "") -> str:
    """A conversation of `turns` answered questions (each `question` and
    `answer`, or short ones naming their number; `question` is its title too)
    with a plan and a two-version report; returns its id."""
    owner = get_user_model().objects.get(username=username)
    conversation = Conversation.objects.create(owner=owner, title=question or f"A thread of {turns} turns")
    session = ArtifactSession.objects.create(conversation=conversation)
    parent = None
    for number in range(1, turns + 1):
        text = answer or f"## Answer {number}\n\n{PARAGRAPH}\n\n- a point\n- another point\n\n{PARAGRAPH}"
        parent = Message.objects.create(
            conversation=conversation,
            parent=parent,
            content=question or f"Question {number}: and what about part {number}?",
            response=text,
        )
        Run.objects.create(message=parent, status=Run.Status.COMPLETED, model="scripted")
    conversation.active_branch = parent
    conversation.save(update_fields=["active_branch"])
    for artifact_id, title in (("task_plan", "Task plan"), ("research_report", "Report")):
        artifact = Artifact.objects.create(session=session, artifact_id=artifact_id, title=title, current_version=0)
        for version, text in ((1, "First draft."), (2, PARAGRAPH)):
            artifact_version_save(
                artifact=artifact,
                content=f"# {title}\n\n{text}",
                version=version,
                update_type="update",
                message_id=parent.pk,
            )
    return str(conversation.pk)


def saved_over_a_persons_edit(*, conversation_id: str, kind: str) -> None:
    """The person edits the report (v3), and an agents' save (v4) lands over
    their text, marked as `artifacts.manager` marks it: "overlap" or "dropped"."""
    from artifacts.branches import branch_shown
    from artifacts.services import artifact_edit

    conversation = Conversation.objects.get(pk=conversation_id)
    branch = branch_shown(conversation=conversation)
    artifact = Artifact.objects.get(session_id=conversation.pk, artifact_id="research_report")
    mine = f"# Report\n\n{PARAGRAPH}\n\nMy note: ground-source pumps cost more to install."
    artifact_edit(branch=branch, artifact=artifact, content=mine, base_version=2)
    artifact.refresh_from_db()
    artifact_version_save(
        artifact=artifact,
        content=f"# Report\n\n{PARAGRAPH}\n\nThe agents' summary.",
        version=4,
        update_type="rewrite",
        message_id=branch.leaf_id,
        conflict_writer="agent",
        conflict_kind=kind,
        overlapped=3,
    )


def copyable_conversation(*, username: str, answer: str, report: str) -> str:
    """One answered turn (`answer`) and a report artifact (`report`); returns the conversation's id."""
    conversation_id = long_conversation(username=username, turns=1, answer=answer)
    conversation = Conversation.objects.get(pk=conversation_id)
    artifact = Artifact.objects.get(session_id=conversation.pk, artifact_id="research_report")
    artifact_version_save(
        artifact=artifact,
        content=report,
        version=3,
        update_type="update",
        message_id=conversation.active_branch_id,
    )
    return conversation_id
