"""What the artifact pane shows. The current content and the list overlay the
working copies of a running turn; versions, diffs and exports are what was
saved (flushed) only."""

import difflib
import re
from dataclasses import dataclass

from django.conf import settings

from conversations.selectors import conversation_get

from . import live
from .models import Artifact, ArtifactSession, ArtifactVersion
from .uploads import upload_too_large_message

TASK_PLAN = "task_plan"
PREVIEW_LENGTH = 200
# A markdown checklist item: "- [ ] open" or "- [x] done".
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[([ xX])\]", re.MULTILINE)


@dataclass(frozen=True)
class Progress:
    done: int
    total: int


@dataclass
class ArtifactView:
    artifact_id: str
    title: str
    content_type: str
    content: str
    version: int
    source: str
    # The saved row, None for an artifact a running turn has not flushed yet.
    saved: Artifact | None
    # True when the content is a running turn's unsaved working copy.
    live: bool = False

    @property
    def preview(self) -> str:
        text = " ".join(self.content.split())
        return text if len(text) <= PREVIEW_LENGTH else text[:PREVIEW_LENGTH] + "…"

    @property
    def is_task_plan(self) -> bool:
        return self.artifact_id == TASK_PLAN

    @property
    def progress(self) -> Progress | None:
        """How much of the task plan's checklist is ticked."""
        if not self.is_task_plan:
            return None
        marks = _CHECKBOX.findall(self.content)
        return Progress(done=sum(mark != " " for mark in marks), total=len(marks)) if marks else None

    @property
    def is_text(self) -> bool:
        return self.saved is None or self.saved.is_text

    @property
    def conflict(self) -> dict | None:
        return self.saved.metadata.get("conflict") if self.saved else None


def artifact_session_get(*, user, conversation_id) -> ArtifactSession | None:
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    if conversation is None:
        return None
    return ArtifactSession.objects.get_or_create(conversation=conversation)[0]


def _view(row: Artifact, working: dict | None) -> ArtifactView:
    view = ArtifactView(
        artifact_id=row.artifact_id,
        title=row.title,
        content_type=row.content_type,
        content=row.content,
        version=row.current_version,
        source=row.source,
        saved=row,
    )
    if working is not None:
        view.title, view.content, view.version = working["title"], working["content"], working["version"]
        view.live = True
    return view


def _working_view(working: dict) -> ArtifactView:
    return ArtifactView(
        artifact_id=working["artifact_id"],
        title=working["title"],
        content_type=working["content_type"],
        content=working["content"],
        version=working["version"],
        source=working["source"],
        saved=None,
        live=True,
    )


def artifact_list(*, session: ArtifactSession) -> list[ArtifactView]:
    """Saved and unsaved artifacts, `task_plan` first, then oldest first."""
    working = live.live_get(session_id=session.pk)
    rows = list(Artifact.objects.filter(session=session).order_by("created_at", "id"))
    views = [_view(row, working.pop(row.artifact_id, None)) for row in rows]
    views += [_working_view(w) for w in working.values()]
    return sorted(views, key=lambda v: not v.is_task_plan)


def artifact_get(*, session: ArtifactSession, artifact_id: str) -> ArtifactView | None:
    working = live.live_get(session_id=session.pk).get(artifact_id)
    row = Artifact.objects.filter(session=session, artifact_id=artifact_id).first()
    if row is None:
        return _working_view(working) if working else None
    return _view(row, working)


def artifact_versions(*, artifact: Artifact) -> list[ArtifactVersion]:
    # The related manager hands each row its artifact by reading the row's
    # artifact_id: deferred, that read is a query per version.
    return list(artifact.versions.order_by("-version").only("artifact", "version", "update_type", "created_at"))


def artifact_version_get(*, artifact: Artifact, version: int) -> ArtifactVersion | None:
    return artifact.versions.filter(version=version).first()


@dataclass
class DiffLine:
    kind: str  # "add", "del", "hunk" or "same"
    text: str


def artifact_diff(*, old: str, new: str, old_label: str, new_label: str) -> list[DiffLine]:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), fromfile=old_label, tofile=new_label, lineterm="", n=3
    )
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return [
        DiffLine(kind=kinds.get(line[:1], "same"), text=line)
        for line in lines
        if not line.startswith(("+++", "---"))
    ]


def pane_context(*, session: ArtifactSession, selected: ArtifactView | None = None, version=None) -> dict:
    """What the artifact pane template needs: the list, the artifact shown
    (task_plan or the first by default) and its saved versions."""
    artifacts = artifact_list(session=session)
    if selected is None and artifacts:
        selected = artifacts[0]
    return {
        "conversation_id": session.pk,
        "artifacts": artifacts,
        "selected": selected,
        "versions": artifact_versions(artifact=selected.saved) if selected and selected.saved else [],
        "shown_version": version,
        # The browser refuses a file over the limit before sending it.
        "upload_max_bytes": settings.ARTIFACT_UPLOAD_MAX_BYTES,
        "upload_too_large": upload_too_large_message(),
    }
