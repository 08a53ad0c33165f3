"""Changes users make to artifacts. They bypass the write-back manager and
commit at once (seed 000: an upload is usable the moment it finishes)."""

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.validators import ProhibitNullCharactersValidator
from django.db import IntegrityError, transaction
from django.utils import timezone

from . import live
from .models import Artifact, ArtifactSession, ArtifactVersion
from .uploads import UploadError, artifact_id_from_filename, convert_upload, upload_too_large_message


def artifact_upload_check(*, size: int) -> None:
    """Refuse a file above the size limit, before anyone reads it into memory."""
    if size > settings.ARTIFACT_UPLOAD_MAX_BYTES:
        raise UploadError(upload_too_large_message())


def artifact_upload(*, session: ArtifactSession, filename: str, data: bytes, content_type: str = "") -> Artifact:
    artifact_upload_check(size=len(data))
    converted = convert_upload(filename=filename, data=data, content_type=content_type)
    for _ in range(5):
        taken = set(Artifact.objects.filter(session=session).values_list("artifact_id", flat=True))
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
                    artifact=artifact, version=1, content=converted.content, update_type="upload"
                )
                live.live_announce(session_id=session.pk)
            return artifact
        except IntegrityError:
            # Another upload took the same id between our read and our insert.
            continue
    raise UploadError("Could not find a free name for this upload; rename the file and try again.")


def artifact_version_save(
    *, artifact: Artifact, content: str, version: int, update_type: str, changes=None, conflict_writer: str = ""
) -> ArtifactVersion:
    """Make `content` the artifact's current text as `version` and keep it in the
    history. With `conflict_writer`, note that this write overlapped another
    one since the writer read the artifact (the pane shows it)."""
    if conflict_writer:
        artifact.metadata = {
            **artifact.metadata,
            "conflict": {
                "version": version,
                "overlapped": artifact.current_version,
                "writer": conflict_writer,
                "at": timezone.now().isoformat(),
            },
        }
    artifact.content, artifact.current_version = content, version
    artifact.lock_version += 1
    artifact.save()
    return ArtifactVersion.objects.create(
        artifact=artifact, version=version, content=content, update_type=update_type, changes=changes
    )


def artifact_edit(
    *, artifact: Artifact, content: str, expected_lock_version: int, update_type: str = "user_edit"
) -> tuple[Artifact, bool]:
    """Save a user's edit as a new version. Returns the artifact and whether the
    edit overlapped another write since the user loaded the artifact; then the
    edit still becomes the newer version and the other text stays in history.
    Text equal to the current text makes no version."""
    if not artifact.is_text:
        raise ValueError("A binary file cannot be edited as text.")
    ProhibitNullCharactersValidator()(content)
    with transaction.atomic():
        row = Artifact.objects.select_for_update().get(pk=artifact.pk)
        if row.content == content:
            return row, False
        conflicted = row.lock_version != expected_lock_version
        artifact_version_save(
            artifact=row,
            content=content,
            version=row.current_version + 1,
            update_type=update_type,
            conflict_writer="user" if conflicted else "",
        )
        live.live_announce(session_id=row.session_id)
    return row, conflicted


def artifact_restore(*, version: ArtifactVersion, expected_lock_version: int) -> tuple[Artifact, bool]:
    """Make an old version's text current again, as a new version: the history
    is never rewritten. Overlapping another write is handled as an edit's is."""
    return artifact_edit(
        artifact=version.artifact, content=version.content, expected_lock_version=expected_lock_version, update_type="restore"
    )
