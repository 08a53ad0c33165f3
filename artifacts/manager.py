"""The write-back artifact manager of one run (seed 000).

A turn works on the artifacts of its branch (`artifacts.branches`): it reads
each artifact's newest version on the path to its message, and the versions it
saves record that message. During a turn the agents' create/update/rewrite
change only this manager's working set; `flush_all` writes each changed
artifact once when the turn ends, so a turn that edits `task_plan` ten times
leaves one version row. While the turn runs, the working copies are published
to the shared cache, where any web process overlays them on the database (see
`artifacts.selectors`).

The run's checkpoint holds the working copies too, since the cache may be gone
when a run resumes after its worker died or an answer to a permission request
(a pause saves nothing); it stores each one as the saved
version it started from (or the text a create or rewrite gave it) and the
splices made since, so that a small edit of a large artifact checkpoints small.
"""

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.utils import timezone

from artifactflow.db import transient_retry
from artifactflow.names import name_clean

from . import live
from .branches import Branch, branch_head, branch_heads, version_is_text, version_title
from .edits import PeopleEdit, people_edits
from .matching import compute_update
from .models import Artifact, ArtifactVersion
from .selectors import TASK_PLAN
from .services import artifact_version_save
from .validators import artifact_id_validate, content_type_validate, title_validate

logger = logging.getLogger(__name__)


# How a turn's save met a person's text (FlushReport, and the conflict the pane shows).
OVERLAPPED, DROPPED = "overlap", "dropped"


class ArtifactError(Exception):
    """A request the model (or user) can correct; the message says how."""


@dataclass
class WorkingArtifact:
    artifact_id: str
    content_type: str
    title: str
    content: str
    source: str
    # Counts every change; the flushed version row gets this number.
    version: int
    # The branch's version this turn started from; None for an artifact new
    # this turn. Saving finds another one there when someone wrote it since.
    read_version: int | None
    # The highest version number saved on any branch when it was read: the
    # first change counts on from it, so branches never share a number.
    taken: int = 0
    is_text: bool = True
    update_type: str = ""
    changes: list = field(default_factory=list)
    dirty: bool = False
    # What a checkpoint stores instead of `content`, which is the saved version
    # `base_version` (or else `base_content`) with the [start, end, text]
    # splices of `edits` applied in order.
    base_version: int | None = None
    base_content: str | None = None
    edits: list = field(default_factory=list)

    @classmethod
    def from_head(cls, head: ArtifactVersion) -> "WorkingArtifact":
        artifact = head.artifact
        return cls(
            artifact_id=artifact.artifact_id,
            content_type=artifact.content_type,
            title=version_title(head),
            content=head.content,
            source=artifact.source,
            version=head.version,
            read_version=head.version,
            taken=artifact.current_version,
            is_text=version_is_text(head),
            base_version=head.version,
        )

    @property
    def is_new(self):
        return self.read_version is None

    def count_change(self) -> None:
        self.version = max(self.version, self.taken) + 1

    def rewrite(self, content: str) -> None:
        self.content = self.base_content = content
        self.base_version, self.edits = None, []

    def checkpoint_entry(self) -> dict:
        return {key: value for key, value in asdict(self).items() if key not in ("content", "dirty")}

    def snapshot(self) -> dict:
        return {
            "artifact_id": self.artifact_id,
            "title": self.title,
            "content_type": self.content_type,
            "content": self.content,
            "version": self.version,
            "source": self.source,
            "is_text": self.is_text,
        }


@dataclass
class Change:
    """What one create, update or rewrite did, in characters."""

    artifact: WorkingArtifact
    removed: int
    added: int
    # For an update: the matching layer that found old_str, and how closely.
    layer: str = "exact"
    similarity: float = 1.0
    # Lines a person wrote in the artifact since an agent last saved it that
    # the change took out: the tool's result asks the model to put them back.
    dropped: list[str] = field(default_factory=list)


@dataclass
class FlushReport:
    flushed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    # Saved without lines a person wrote there since an agent last saved it.
    dropped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


class ArtifactManager:
    def __init__(
        self,
        *,
        branch: Branch,
        run_id: int | None = None,
        on_change: Callable[[], None] | None = None,
        fence: Callable[[], None] | None = None,
    ):
        """`fence` is called first in every flush transaction; it raises to
        stop a worker that no longer holds its run from writing (agents.lease)."""
        self.branch = branch
        self.session = branch.session
        self.run_id = run_id
        self._on_change = on_change
        self._fence = fence
        self._working: dict[str, WorkingArtifact] = {}
        # True when the last publishing to the live cache failed (it was down):
        # `live_republish` tries again.
        self._live_unpublished = False
        self._people_edits: dict[str, PeopleEdit] | None = None

    # --- operations ------------------------------------------------------------

    def create(
        self,
        *,
        artifact_id: str,
        content: str,
        title: str = "",
        content_type: str = "text/markdown",
        source: str = Artifact.Source.AGENT,
    ) -> Change:
        content_type = content_type or "text/markdown"
        try:
            artifact_id_validate(artifact_id)
            title_validate(title)
            content_type_validate(content_type)
        except ValidationError as exc:
            raise ArtifactError(exc.messages[0]) from None
        # A line break is refused above, so the model hears of it; what hides or reorders text just goes.
        title = name_clean(title)
        if self._get(artifact_id) is not None:
            raise ArtifactError(
                f"Artifact '{artifact_id}' already exists. Use update_artifact or rewrite_artifact to change it."
            )
        # An artifact of another branch may have the id: its numbers are taken.
        taken = (
            Artifact.objects.filter(session=self.session, artifact_id=artifact_id)
            .values_list("current_version", flat=True)
            .first()
        ) or 0
        working = WorkingArtifact(
            artifact_id=artifact_id,
            content_type=content_type,
            title=title or artifact_id,
            content=content,
            source=source,
            version=taken + 1,
            read_version=None,
            taken=taken,
            update_type="create",
            base_content=content,
        )
        self._working[artifact_id] = working
        self._changed(working)
        return Change(artifact=working, removed=0, added=len(content))

    def update(self, *, artifact_id: str, old_str: str, new_str: str) -> Change:
        working = self._require(artifact_id)
        result = compute_update(working.content, old_str, new_str)
        if not result.ok:
            raise ArtifactError(result.error)
        start, end = result.span
        working.content = result.new_content
        working.edits.append([start, end, new_str])
        working.changes.append([old_str, new_str])
        if not working.is_new:
            working.update_type = "update_fuzzy" if result.layer == "fuzzy" else "update"
        working.count_change()
        self._changed(working)
        return Change(
            artifact=working,
            removed=end - start,
            added=len(new_str),
            layer=result.layer,
            similarity=result.similarity,
            dropped=self._dropped(working),
        )

    def rewrite(self, *, artifact_id: str, content: str) -> Change:
        working = self._require(artifact_id)
        removed = len(working.content)
        working.rewrite(content)
        if not working.is_new:
            working.update_type = "rewrite"
        working.count_change()
        self._changed(working)
        return Change(artifact=working, removed=removed, added=len(content), dropped=self._dropped(working))

    def read(self, *, artifact_id: str, version: int | None = None) -> dict:
        """The working copy, or a version saved on this branch."""
        if version is None:
            return self._require(artifact_id).snapshot()
        row = (
            ArtifactVersion.objects.filter(
                self.branch.visible(),
                artifact__session=self.session,
                artifact__artifact_id=artifact_id,
                version=version,
            )
            .select_related("artifact")
            .first()
        )
        if row is None:
            raise ArtifactError(f"Artifact '{artifact_id}' has no saved version {version} on this branch.")
        return {**WorkingArtifact.from_head(row).snapshot(), "version": row.version}

    def inventory(self) -> list[dict]:
        """Every artifact of the branch as this turn sees it: the saved ones
        with this turn's working copies over them, oldest first."""
        entries = {
            head.artifact.artifact_id: WorkingArtifact.from_head(head) for head in branch_heads(branch=self.branch)
        }
        entries.update(self._working)
        return [working.snapshot() for working in entries.values()]

    def people_edits(self) -> dict[str, PeopleEdit]:
        """What people changed in the branch's artifacts since an agent last
        saved them, as saved when the turn first asked: the turn's own saves
        do not change it."""
        if self._people_edits is None:
            self._people_edits = people_edits(branch=self.branch)
        return self._people_edits

    def _dropped(self, working: WorkingArtifact) -> list[str]:
        """The lines a person wrote in the version this turn read that the
        working copy no longer holds. The task plan is the lead's checklist,
        which its prompt has it rewrite for each new request: a person's
        change to it is in the prompt, and is not kept against the lead."""
        if working.artifact_id == TASK_PLAN:
            return []
        edit = self.people_edits().get(working.artifact_id)
        if edit is None or edit.version != working.read_version:
            return []
        return edit.dropped_from(working.content)

    def working_state(self) -> list[dict]:
        """The unsaved changes, for a run's checkpoint: a run resumed after its
        worker died continues with them (see `restore`). Each is a base and
        splices, not the working copy itself."""
        return [w.checkpoint_entry() for w in self._working.values() if w.dirty]

    def restore(self, entries: list[dict]) -> None:
        for entry in entries:
            entry = self._entry_upgraded(entry)
            if "content" in entry:
                # The earlier format, whole working copies: a run that was
                # paused or whose worker died across the upgrade.
                working = WorkingArtifact(**entry, base_content=entry["content"])
            else:
                working = WorkingArtifact(**entry, content=self._replayed(entry), dirty=True)
            self._working[working.artifact_id] = working
        if entries:
            self._live_publish()

    def _entry_upgraded(self, entry: dict) -> dict:
        """A checkpoint entry from before branches (a run paused across the
        upgrade) held the artifact's lock_version where `read_version` is now:
        it continues from what the branch holds."""
        if "base_lock_version" not in entry:
            return entry
        entry = dict(entry)
        if entry.pop("base_lock_version") is None:
            entry["read_version"] = None
        else:
            artifact = Artifact.objects.filter(session=self.session, artifact_id=entry["artifact_id"]).first()
            head = branch_head(branch=self.branch, artifact=artifact) if artifact else None
            entry["read_version"] = head.version if head else None
        return entry

    def _replayed(self, entry: dict) -> str:
        text = entry["base_content"]
        if text is None:
            # Version rows never change, whatever was written since.
            text = ArtifactVersion.objects.values_list("content", flat=True).get(
                artifact__session=self.session,
                artifact__artifact_id=entry["artifact_id"],
                version=entry["base_version"],
            )
        for start, end, inserted in entry["edits"]:
            text = text[:start] + inserted + text[end:]
        return text

    def working_set(self) -> list[dict]:
        """What changed this turn, for the live view."""
        return [w.snapshot() for w in self._working.values() if w.dirty]

    # --- flushing --------------------------------------------------------------

    def flush_all(self) -> FlushReport:
        """Write every changed artifact, each in its own transaction so one
        failure does not undo the others. Clears the live view afterwards."""
        report = FlushReport()
        for working in [w for w in self._working.values() if w.dirty]:
            try:
                conflicted = self._flush_with_retry(working)
            except DatabaseError as exc:
                logger.exception("Flushing artifact %s failed", working.artifact_id)
                report.failed[working.artifact_id] = str(exc) or exc.__class__.__name__
                continue
            working.dirty = False
            report.flushed.append(working.artifact_id)
            if conflicted == OVERLAPPED:
                report.conflicts.append(working.artifact_id)
            elif conflicted == DROPPED:
                report.dropped.append(working.artifact_id)
        # What failed is reported in the run's terminal event; a finished run's
        # working copies are not shown any more either way.
        live.live_clear(session_id=self.session.pk, run_id=self.run_id)
        if report.flushed and self._on_change is not None:
            self._on_change()
        return report

    def _flush_with_retry(self, working: WorkingArtifact) -> str:
        started = timezone.now()
        attempts = 0

        def write() -> str:
            nonlocal attempts
            attempts += 1
            with transaction.atomic():
                if self._fence is not None:
                    self._fence()
                if attempts > 1 and self._already_written(working, since=started):
                    return ""
                return self._write(working)

        return transient_retry(write, what=f"artifact {working.artifact_id}")

    def _already_written(self, working: WorkingArtifact, *, since) -> bool:
        # The commit of an earlier attempt may have succeeded even though the
        # attempt reported an error; writing again would duplicate the version.
        return ArtifactVersion.objects.filter(
            artifact__session=self.session,
            artifact__artifact_id=working.artifact_id,
            version__gte=working.version,
            created_at__gte=since,
            content=working.content,
        ).exists()

    def _write(self, working: WorkingArtifact) -> str:
        """Returns OVERLAPPED when someone else wrote the artifact on this
        branch since it was read, DROPPED when the text saved left out lines
        a person wrote in the version it was read from, else ""."""
        row = Artifact.objects.select_for_update().filter(session=self.session, artifact_id=working.artifact_id).first()
        if row is None:
            row = Artifact.objects.create(
                session=self.session,
                artifact_id=working.artifact_id,
                content_type=working.content_type,
                title=working.title,
                source=working.source,
                current_version=0,
            )
            conflicted, head = "", None
        else:
            # A user edit landed on this branch since this turn read the
            # artifact: the later writer becomes the newer version and both
            # texts stay in the history. Another branch's versions are not in
            # the way, but their numbers are taken.
            head = branch_head(branch=self.branch, artifact=row)
            if (head.version if head else None) != working.read_version:
                conflicted = OVERLAPPED
            else:
                conflicted = DROPPED if self._dropped(working) else ""
            working.version = max(working.version, row.current_version + 1)
            row.title, row.content_type = working.title, working.content_type
        artifact_version_save(
            artifact=row,
            content=working.content,
            version=working.version,
            update_type=working.update_type,
            changes=working.changes or None,
            title=working.title,
            message_id=self.branch.leaf_id,
            run_id=self.run_id,
            conflict_writer="agent" if conflicted else "",
            conflict_kind=conflicted,
            overlapped=head.version if head else None,
        )
        working.read_version = working.taken = working.version
        working.changes = []
        working.base_version, working.base_content, working.edits = working.version, None, []
        return conflicted

    # --- internals ---------------------------------------------------------------

    def _get(self, artifact_id: str) -> WorkingArtifact | None:
        if artifact_id in self._working:
            return self._working[artifact_id]
        heads = branch_heads(branch=self.branch, artifact_id=artifact_id)
        if not heads:
            return None
        working = WorkingArtifact.from_head(heads[0])
        if not working.is_text:
            raise ArtifactError(
                f"Artifact '{artifact_id}' is a binary file ({working.content_type}); it cannot be read or edited as text."
            )
        self._working[artifact_id] = working
        return working

    def _require(self, artifact_id: str) -> WorkingArtifact:
        working = self._get(artifact_id)
        if working is None:
            raise ArtifactError(f"There is no artifact '{artifact_id}'. Create it with create_artifact first.")
        return working

    def _changed(self, working: WorkingArtifact) -> None:
        working.dirty = True
        self._live_publish()
        if self._on_change is not None:
            self._on_change()

    # --- the live view -----------------------------------------------------------

    def live_republish(self) -> None:
        """Publish the working copies again if the last publishing failed
        because the cache was down, so that pages show them again once it is
        back; then wake the pages. The worker calls it after each checkpoint."""
        if self._live_unpublished and self._live_publish() and self._on_change is not None:
            self._on_change()

    def _live_publish(self) -> bool:
        published = live.live_put(session_id=self.session.pk, run_id=self.run_id, artifacts=self.working_set())
        self._live_unpublished = not published
        return published
