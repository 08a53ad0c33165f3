"""Conversations for the artifact pane's browser tests (tests/e2e/test_pane.py),
made through the artifacts services inside the portal (`Portal.shell`)."""

import base64

from django.contrib.auth import get_user_model

from agents.models import Run
from artifacts.branches import branch_shown
from artifacts.models import Artifact, ArtifactSession
from artifacts.services import artifact_upload_save, artifact_version_save
from artifacts.uploads import convert_upload
from conversations.models import Conversation, Message

PARAGRAPH = " ".join(["Air-source heat pumps keep a useful coefficient of performance well below freezing."] * 4)
# A file name of 300 characters with no space to break at.
LONG_NAME = "measurements_" + "x" * 284 + ".md"
BIG_LINE = "Line {n:07d}: solid-state batteries trade energy density against cycle life in the cold.\n"


def _conversation(username: str, title: str) -> tuple[Conversation, Message]:
    owner = get_user_model().objects.get(username=username)
    conversation = Conversation.objects.create(owner=owner, title=title)
    ArtifactSession.objects.create(conversation=conversation)
    message = Message.objects.create(conversation=conversation, content="Write the reports", response="Done.")
    Run.objects.create(message=message, status=Run.Status.COMPLETED, model="scripted")
    conversation.active_branch = message
    conversation.save(update_fields=["active_branch"])
    return conversation, message


def _saved(conversation, message, *, artifact_id: str, title: str, contents: list[str], content_type="text/markdown"):
    artifact = Artifact.objects.create(
        session=conversation.artifact_session,
        artifact_id=artifact_id,
        title=title,
        content_type=content_type,
        current_version=0,
    )
    for version, content in enumerate(contents, start=1):
        artifact_version_save(
            artifact=artifact, content=content, version=version, update_type="update", message_id=message.pk
        )


def six_artifacts(*, username: str) -> str:
    """A plan, three reports (one in two versions), an upload whose name is
    300 characters long and a base64 text: six artifacts; returns the id."""
    conversation, message = _conversation(username, "Six artifacts")
    _saved(conversation, message, artifact_id="task_plan", title="Task plan", contents=["# Plan\n\n- [x] a\n- [ ] b"])
    for number in (1, 2, 3):
        body = f"# Report {number}\n\nFirst line of report {number}.\n\n{PARAGRAPH}\n\n{PARAGRAPH}"
        contents = [body, body + "\n\nA second version."] if number == 1 else [body]
        _saved(conversation, message, artifact_id=f"report_{number}", title=f"Report {number}", contents=contents)
    data = f"# Long name\n\nFirst line of the long-named file.\n\n{PARAGRAPH}".encode()
    branch = branch_shown(conversation=conversation)
    artifact_upload_save(
        branch=branch, filename=LONG_NAME, data=data, converted=convert_upload(filename=LONG_NAME, data=data)
    )
    blob = base64.b64encode(bytes(range(256)) * 24).decode()
    _saved(
        conversation,
        message,
        artifact_id="encoded.txt",
        title="encoded.txt",
        contents=[blob + "\n" + blob],
        content_type="text/plain",
    )
    return str(conversation.pk)


def big_text(*, username: str, size: int = 20 * 1024 * 1024) -> str:
    """A conversation with one text artifact of about `size` bytes; returns the id."""
    conversation, message = _conversation(username, "A big text")
    lines = size // len(BIG_LINE.format(n=0))
    text = "".join(BIG_LINE.format(n=n) for n in range(lines))
    _saved(conversation, message, artifact_id="big.txt", title="big.txt", contents=[text], content_type="text/plain")
    return str(conversation.pk)


REPORT_SECTION = (
    "## {n}. 热泵在寒冷地区 Heat pumps in the cold\n\n"
    "Air-source heat pumps keep a **useful** coefficient of performance well below freezing; "
    "see [the field study](https://example.org/study/{n}) and `COP`.\n\n"
    "- 测量点 {n}: 零下十五度时 COP 为 2.1\n- second point, *in italics*\n\n"
    "| site | COP |\n|---|---|\n| {n} | 2.1 |\n\n"
)


def big_report(*, username: str, size: int = 5 * 1024 * 1024) -> str:
    """A conversation with one markdown report of about `size` bytes
    (headings, links, lists and tables, in English and Chinese); returns the id."""
    conversation, message = _conversation(username, "A big report")
    sections, total, n = [], 0, 0
    while total < size:
        section = REPORT_SECTION.format(n=n)
        sections.append(section)
        total += len(section.encode())
        n += 1
    _saved(conversation, message, artifact_id="report.md", title="Report", contents=["".join(sections)])
    return str(conversation.pk)


def long_words(*, username: str) -> str:
    """A conversation whose title, question and answer hold 300-character
    words and a base64 line; returns its id."""
    word = "w" * 300
    blob = base64.b64encode(bytes(range(256)) * 4).decode()
    # A title is at most 200 characters (Postgres holds it to that): still one word far wider than the list.
    conversation, message = _conversation(username, ("title_" + word)[:200])
    message.content = f"What does {word} mean?"
    message.response = f"It means {word}.\n\n{blob}\n\n```\n{blob}\n```"
    message.save(update_fields=["content", "response"])
    return str(conversation.pk)
