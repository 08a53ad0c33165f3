"""Changes users make to artifacts. They bypass the write-back manager and
commit at once (seed 000: an upload is usable the moment it finishes)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.validators import ProhibitNullCharactersValidator
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from . import live
from .branches import Branch, branch_head
from .live import ActiveRun
from .models import Artifact, ArtifactSession, ArtifactVersion
from .uploads import (
    ConvertedUpload,
    UploadError,
    artifact_id_from_filename,
    convert_upload,
    upload_too_large_message,
)


def artifact_upload_check(*, size: int) -> None:
    """Refuse a file above the size limit, before anyone reads it into memory."""
    if size > settings.ARTIFACT_UPLOAD_MAX_BYTES:
        raise UploadError(upload_too_large_message())


def artifact_upload(*, branch: Branch, filename: str, data: bytes, content_type: str = "") -> Artifact:
    """Save an uploaded file as a new artifact on the branch, its text read here."""
    artifact_upload_check(size=len(data))
    converted = convert_upload(filename=filename, data=data, content_type=content_type)
    return artifact_upload_save(branch=branch, filename=filename, data=data, converted=converted)


def artifact_upload_save(*, branch: Branch, filename: str, data: bytes, converted: ConvertedUpload) -> Artifact:
    """Save an uploaded file, converted already, as a new artifact on every
    branch of the conversation: it is the user's material, whichever question
    they ask or edit next (docs/artifacts.md). Edits of it are the branch's.
    Its id comes from the file's name, with a suffix when another artifact has
    it, saved or being written by a running turn on any branch (which would
    otherwise save over it)."""
    session = branch.session
    if session._state.adding:
        # The session of a conversation made without one (branches.branch_shown) comes with its first upload.
        session = ArtifactSession.objects.get_or_create(conversation_id=session.pk)[0]
    writing = live.live_writing(session_id=session.pk, runs=branch.active_runs)
    for _ in range(5):
        taken = writing | set(Artifact.objects.filter(session=session).values_list("artifact_id", flat=True))
        artifact_id = artifact_id_from_filename(filename, taken=taken)
        try:
            with transaction.atomic():
                artifact = Artifact.objects.create(
                    session=session,
                    artifact_id=artifact_id,
                    content_type=converted.content_type,
                    title=converted.title,
                    content=converted.content,
                    source=Artifact.Source.USER_UPLOAD,
                    metadata={"original_name": converted.title, "size": converted.size},
                )
                artifact.file.save(artifact_id, ContentFile(data), save=True)
                ArtifactVersion.objects.create(
                    artifact=artifact,
                    version=1,
                    content=converted.content,
                    title=converted.title,
                    update_type="upload",
                    message_id=None,
                )
                live.live_announce(session_id=session.pk)
            return artifact
        except IntegrityError:
            # Another upload took the same id between our read and our insert.
            continue
    raise UploadError(gettext("Could not find a free name for this upload; rename the file and try again."))


def artifact_version_save(
    *,
    artifact: Artifact,
    content: str,
    version: int,
    update_type: str,
    message_id: int | None,
    title: str = "",
    changes=None,
    run_id: int | None = None,
    conflict_writer: str = "",
    conflict_kind: str = "",
    overlapped: int | None = None,
) -> ArtifactVersion:
    """Save `content` as `version` on the branch of `message_id`; as the newest
    version of all, it is the artifact's current text too. With
    `conflict_writer`, note what the pane must show: that this write
    overlapped another one on the branch since the writer read the artifact,
    or with `conflict_kind` "dropped", that it left out lines a person wrote
    in the version before it: `overlapped`, by default the newest version."""
    if conflict_writer:
        conflict = {
            "version": version,
            "overlapped": artifact.current_version if overlapped is None else overlapped,
            "writer": conflict_writer,
            "at": timezone.now().isoformat(),
        }
        if conflict_kind:
            conflict["kind"] = conflict_kind
        artifact.metadata = {**artifact.metadata, "conflict": conflict}
    artifact.content, artifact.current_version = content, version
    artifact.save()
    return ArtifactVersion.objects.create(
        artifact=artifact,
        version=version,
        content=content,
        title=title or artifact.title,
        update_type=update_type,
        changes=changes,
        message_id=message_id,
        run_id=run_id,
    )


class ChangedMeanwhile(Exception):
    """A person's edit or restore was based on a version the branch has moved
    on from: nothing was saved, and the person chooses what happens."""

    def __init__(self, theirs: ArtifactVersion):
        super().__init__(f"{theirs.artifact} changed on this branch: it is at v{theirs.version} now.")
        self.theirs = theirs


def artifact_edit(
    *, branch: Branch, artifact: Artifact, content: str, base_version: int, update_type: str = "user_edit"
) -> ArtifactVersion:
    """Save a user's edit, made on the branch's `base_version`, as a new
    version on the branch, and return the branch's newest version. Text equal
    to the branch's current text makes no version. If the branch's version is
    another by now (an agent's save, another tab's edit), nothing is saved
    over it: `ChangedMeanwhile` names it, for the person to choose."""
    ProhibitNullCharactersValidator()(content)
    with transaction.atomic():
        row = Artifact.objects.select_for_update().get(pk=artifact.pk)
        head = branch_head(branch=branch, artifact=row)
        if head is None:
            raise ValidationError(gettext("This artifact is not on this branch of the conversation."))
        if row.file and not head.content:
            raise ValidationError(gettext("A binary file cannot be edited as text."))
        if head.content == content:
            return head
        if head.version != base_version:
            raise ChangedMeanwhile(head)
        saved = artifact_version_save(
            artifact=row,
            content=content,
            version=row.current_version + 1,
            update_type=update_type,
            title=head.title,
            message_id=branch.leaf_id,
        )
        live.live_announce(session_id=row.session_id)
    return saved


def artifact_restore(*, branch: Branch, version: ArtifactVersion, base_version: int) -> ArtifactVersion:
    """Make an old version's text current again on the branch, as a new
    version: the history is never rewritten. It may be another branch's
    version. A stale `base_version` is refused as an edit's is."""
    return artifact_edit(
        branch=branch,
        artifact=version.artifact,
        content=version.content,
        base_version=base_version,
        update_type="restore",
    )


def artifact_conflict_dismiss(*, artifact: Artifact, version: int) -> None:
    """The person keeps the agents' `version` that was saved over their text:
    the pane stops asking. A marker of another version is left alone."""
    with transaction.atomic():
        row = Artifact.objects.select_for_update().get(pk=artifact.pk)
        conflict = row.metadata.get("conflict")
        if conflict and conflict.get("version") == version:
            row.metadata = {key: value for key, value in row.metadata.items() if key != "conflict"}
            row.save(update_fields=["metadata", "updated_at"])
            live.live_announce(session_id=row.session_id)


# A text the person chose to discard in a conflict is kept in their session,
# one per artifact, to take back while it lasts: the newest few, each no
# longer than an artifact a person edits by hand is likely to be.
DISCARDED_KEY = "artifacts_discarded"
DISCARDED_MAX_COUNT = 5
DISCARDED_MAX_CHARS = 1_000_000
DISCARDED_TOO_LONG = gettext_noop(
    "Your text is too long to keep for recovery. Copy it somewhere first, or keep yours or merge instead."
)


def discarded_keep(*, session, conversation_id, artifact_id: str, text: str) -> None:
    """Keep `text` in the Django `session` as the one discarded for this
    artifact, dropping the oldest beyond the count."""
    if len(text) > DISCARDED_MAX_CHARS:
        raise ValidationError(gettext(DISCARDED_TOO_LONG))
    key = [str(conversation_id), artifact_id]
    kept = [entry for entry in session.get(DISCARDED_KEY, []) if entry[:2] != key]
    kept.append([*key, text, timezone.now().isoformat()])
    session[DISCARDED_KEY] = kept[-DISCARDED_MAX_COUNT:]


def discarded_get(*, session, conversation_id, artifact_id: str) -> str | None:
    key = [str(conversation_id), artifact_id]
    return next((entry[2] for entry in session.get(DISCARDED_KEY, []) if entry[:2] == key), None)


def discarded_drop(*, session, conversation_id, artifact_id: str) -> None:
    key = [str(conversation_id), artifact_id]
    kept = session.get(DISCARDED_KEY, [])
    if any(entry[:2] == key for entry in kept):
        session[DISCARDED_KEY] = [entry for entry in kept if entry[:2] != key]


ARTIFACT_BEING_WRITTEN = gettext_noop(
    "The running turn is writing this artifact. Stop the turn, or wait for it to finish, then delete it."
)


def artifact_delete(*, artifact: Artifact, active_runs: tuple[ActiveRun, ...]) -> None:
    """Delete the artifact with all its versions, on every branch, and its
    uploaded file. Refused while one of its session's `active_runs` has
    unsaved changes to it: saving them would bring it back."""
    with transaction.atomic():
        row = Artifact.objects.select_for_update().filter(pk=artifact.pk).first()
        if row is None:
            return
        if row.artifact_id in live.live_writing(session_id=row.session_id, runs=active_runs):
            raise ValidationError(gettext(ARTIFACT_BEING_WRITTEN))
        row.delete()
        live.live_announce(session_id=row.session_id)
        if row.file:
            # A delete rolled back must not lose the file.
            transaction.on_commit(lambda: row.file.delete(save=False))


def branch_copy(*, branch: Branch, session: ArtifactSession, message_ids: dict[int, int]) -> int:
    """Copy the artifacts of `branch` into `session` (a new conversation's) as
    the branch has them: each with the versions on the branch, renumbered from
    1, written at the copied messages (`message_ids`, old id to new). Returns
    how many artifacts were copied. A file (an upload's original, a binary
    artifact) is copied too, so deleting either conversation keeps the other's."""
    versions = (
        ArtifactVersion.objects.filter(branch.visible(), artifact__session=branch.session)
        .select_related("artifact")
        .order_by("artifact__created_at", "artifact_id", "version")
    )
    copies: dict[int, Artifact] = {}
    new_versions = []
    for version in versions.iterator(chunk_size=200):
        original = version.artifact
        copy = copies.get(original.pk)
        if copy is None:
            copy = copies[original.pk] = Artifact.objects.create(
                session=session,
                artifact_id=original.artifact_id,
                content_type=original.content_type,
                title=original.title,
                source=original.source,
                metadata={key: value for key, value in original.metadata.items() if key != "conflict"},
                current_version=0,
            )
            if original.file:
                with original.file.open("rb") as data:
                    copy.file.save(copy.artifact_id, ContentFile(data.read()), save=False)
        copy.current_version += 1
        copy.content, copy.title = version.content, version.title or original.title
        new_versions.append(
            ArtifactVersion(
                artifact=copy,
                version=copy.current_version,
                content=version.content,
                title=version.title,
                update_type=version.update_type,
                changes=version.changes,
                message_id=message_ids.get(version.message_id) if version.message_id else None,
            )
        )
    for copy in copies.values():
        copy.save()
    ArtifactVersion.objects.bulk_create(new_versions, batch_size=200)
    return len(copies)
