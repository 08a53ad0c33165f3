"""Removing artifacts by hand (seed 001): what the `delete_conversation`,
`delete_artifact` and `cleanup_artifacts` commands do (docs/cleanup.md).

Every removal is planned first, with the bytes it frees, and a plan is what
gets applied: a dry run lists exactly what `--apply` removes, unless the
conversation changed in between, which applying checks again."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Func, IntegerField, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from conversations.models import Conversation

from .models import Artifact, ArtifactVersion
from .services import artifact_delete

SESSION_ACTIVE = "A turn is running: stop it and wait for it to end."
CHANGED = "It changed after the plan was made: plan again."
GONE = "It was deleted after the plan was made."

# Where uploaded files live in storage, a directory per conversation (models.upload_path).
UPLOAD_ROOT = "artifacts"
# An upload writes its file before its row commits: a file this recent may
# be one being uploaded right now rather than an orphan.
ORPHAN_GRACE = timedelta(hours=1)


class OctetLength(Func):
    """The UTF-8 size of a text in bytes; Length counts characters, and the
    cleanup promises bytes (a CJK character is three)."""

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra_context)


@dataclass(frozen=True)
class CleanupCandidate:
    artifact_pk: int
    conversation_id: uuid.UUID
    artifact_id: str
    title: str
    source: str
    # Its text, every version's text (UTF-8) and its stored file.
    bytes: int
    updated_at: datetime


@dataclass
class CleanupPlan:
    candidates: list[CleanupCandidate]
    # (conversation id, why): conversations whose artifacts are not touched.
    refused: list[tuple[uuid.UUID, str]]
    # Files under the upload directory that no artifact refers to, relative to MEDIA_ROOT.
    orphaned_files: list[str]
    orphaned_bytes: int = 0
    # Candidates that `max_bytes` left for another pass, oldest first.
    over_limit: list[CleanupCandidate] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(candidate.bytes for candidate in self.candidates)


@dataclass
class CleanupReport:
    removed: list[CleanupCandidate]
    skipped: list[tuple[CleanupCandidate, str]]
    orphans_deleted: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(candidate.bytes for candidate in self.removed)


@dataclass
class SessionDeletePlan:
    conversation: Conversation
    messages: int
    runs: int
    artifacts: list[CleanupCandidate]
    active: bool

    @property
    def bytes(self) -> int:
        return sum(candidate.bytes for candidate in self.artifacts)


def bytes_text(size: int) -> str:
    """A size for the commands' output: '1.2 MB (1234567 bytes)'."""
    # filesizeformat keeps the number and unit together with a no-break space, for HTML.
    return f"{filesizeformat(size).replace(chr(0xA0), ' ')} ({size} bytes)"


def _storage():
    return Artifact._meta.get_field("file").storage


def _conversation_id(value) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ValidationError(f"{str(value)[:100]!r} is not a conversation id (a UUID).") from None


def _conversation_ids_checked(values) -> list[uuid.UUID]:
    ids = [_conversation_id(value) for value in values]
    missing = set(ids) - set(Conversation.objects.filter(pk__in=ids).values_list("pk", flat=True))
    if missing:
        raise ValidationError(f"There is no conversation {', '.join(sorted(map(str, missing)))}.")
    return ids


def _file_size(storage, name: str) -> int:
    if not name:
        return 0
    try:
        return storage.size(name)
    except OSError:
        # A row whose file is gone frees only its text.
        return 0


def _candidates(artifacts) -> list[CleanupCandidate]:
    """The artifacts with their sizes, oldest first, in one query however many."""
    version_bytes = (
        ArtifactVersion.objects.filter(artifact=OuterRef("pk"))
        .values("artifact")
        .annotate(total=Sum(OctetLength("content")))
        .values("total")
    )
    rows = (
        artifacts.annotate(version_bytes=Coalesce(Subquery(version_bytes), 0), content_bytes=OctetLength("content"))
        .order_by("updated_at", "pk")
        .values_list(
            "pk", "session_id", "artifact_id", "title", "source", "updated_at", "content_bytes", "version_bytes", "file"
        )
    )
    storage = _storage()
    return [
        CleanupCandidate(
            artifact_pk=pk,
            conversation_id=session_id,
            artifact_id=artifact_id,
            title=title,
            source=source,
            bytes=content_bytes + version_bytes + _file_size(storage, file),
            updated_at=updated_at,
        )
        for pk, session_id, artifact_id, title, source, updated_at, content_bytes, version_bytes, file in rows.iterator()
    ]


def _non_negative(value, *, name: str) -> None:
    if value is not None and value < 0:
        raise ValidationError(f"{name} cannot be negative (got {value}).")


def cleanup_plan(
    *,
    busy,
    conversation_ids: list | None = None,
    older_than_days: int | None = None,
    max_bytes: int | None = None,
    include_all: bool = False,
) -> CleanupPlan:
    """What a cleanup would remove: the run artifacts (`Artifact.Source.RUN`),
    or with `include_all` every artifact, of the given conversations (default:
    all), last changed more than `older_than_days` ago. The conversations with
    a turn in progress, `busy` (a subquery of their ids, from the agents app:
    agents.selectors.conversations_busy), are refused. `max_bytes` caps the bytes freed: the oldest
    candidates are taken until the next one would pass it."""
    _non_negative(older_than_days, name="older_than_days")
    _non_negative(max_bytes, name="max_bytes")
    artifacts = Artifact.objects.all()
    ids = None
    if conversation_ids is not None:
        ids = _conversation_ids_checked(conversation_ids)
        artifacts = artifacts.filter(session_id__in=ids)
    if not include_all:
        artifacts = artifacts.filter(source=Artifact.Source.RUN)
    if older_than_days is not None:
        artifacts = artifacts.filter(updated_at__lt=timezone.now() - timedelta(days=older_than_days))

    # Named conversations are reported refused even with nothing to remove;
    # of the rest, only those the cleanup would otherwise have touched.
    if ids is not None:
        refused = Conversation.objects.filter(pk__in=ids).filter(pk__in=busy).values_list("pk", flat=True)
    else:
        refused = artifacts.filter(session_id__in=busy).values_list("session_id", flat=True)
    candidates = _candidates(artifacts.exclude(session_id__in=busy))

    over_limit = []
    if max_bytes is not None:
        total = 0
        for index, candidate in enumerate(candidates):
            if total + candidate.bytes > max_bytes:
                candidates, over_limit = candidates[:index], candidates[index:]
                break
            total += candidate.bytes

    orphaned_files, orphaned_bytes = _orphans(conversation_ids=ids)
    return CleanupPlan(
        candidates=candidates,
        refused=[(conversation_id, SESSION_ACTIVE) for conversation_id in sorted(set(refused), key=str)],
        orphaned_files=orphaned_files,
        orphaned_bytes=orphaned_bytes,
        over_limit=over_limit,
    )


def _orphans(*, conversation_ids: list[uuid.UUID] | None) -> tuple[list[str], int]:
    """The stored files no artifact refers to, in the given conversations'
    directories (default: all of them), and their bytes."""
    storage = _storage()
    if conversation_ids is None:
        directories, names = _listdir(storage, UPLOAD_ROOT)
        names = [f"{UPLOAD_ROOT}/{name}" for name in names]
    else:
        directories, names = [str(conversation_id) for conversation_id in conversation_ids], []
    for directory in directories:
        path = f"{UPLOAD_ROOT}/{directory}"
        names += [f"{path}/{name}" for name in _listdir(storage, path)[1]]
    referenced = _referenced_files()
    recent = timezone.now() - ORPHAN_GRACE
    orphans = sorted(name for name in names if name not in referenced and storage.get_modified_time(name) < recent)
    return orphans, sum(_file_size(storage, name) for name in orphans)


def _listdir(storage, path: str) -> tuple[list[str], list[str]]:
    try:
        return storage.listdir(path)
    except FileNotFoundError:
        # Nothing was ever uploaded there.
        return [], []


def _referenced_files() -> set[str]:
    return set(Artifact.objects.exclude(file="").values_list("file", flat=True).iterator())


def cleanup_apply(*, plan: CleanupPlan, busy, delete_orphans: bool = False) -> CleanupReport:
    """Remove exactly the plan's candidates, each checked again as it goes:
    one deleted or changed since, or whose conversation is `busy` now (as in
    `cleanup_plan`), is skipped with the reason. Files go once the deletion is committed.
    With `delete_orphans`, the plan's orphaned files are deleted too."""
    report = CleanupReport(removed=[], skipped=[])
    for candidate in plan.candidates:
        reason = _candidate_remove(candidate, busy=busy)
        if reason:
            report.skipped.append((candidate, reason))
        else:
            report.removed.append(candidate)
    if delete_orphans:
        # A file some artifact took up since the plan is not an orphan any more.
        referenced, storage = _referenced_files(), _storage()
        for name in plan.orphaned_files:
            if name not in referenced:
                storage.delete(name)
                report.orphans_deleted.append(name)
    return report


def _candidate_remove(candidate: CleanupCandidate, *, busy) -> str:
    """Why the candidate was not removed; empty when it was."""
    with transaction.atomic():
        row = Artifact.objects.select_for_update().filter(pk=candidate.artifact_pk).first()
        if row is None:
            return GONE
        if row.updated_at != candidate.updated_at:
            return CHANGED
        if Conversation.objects.filter(pk=row.session_id, pk__in=busy).exists():
            return SESSION_ACTIVE
        # No turn is in progress here (the check above): none has working copies to save over the deletion.
        try:
            artifact_delete(artifact=row, active_runs=())
        except ValidationError as exc:
            return " ".join(exc.messages)
    return ""


def session_delete_plan(*, conversation_id, busy) -> SessionDeletePlan:
    """What deleting the conversation (conversations.lifecycle.conversation_delete) would
    remove, and whether it is `busy` (as in `cleanup_plan`), which refuses it."""
    [pk] = _conversation_ids_checked([conversation_id])
    conversation = (
        Conversation.objects.select_related("owner")
        .annotate(message_count=Count("messages", distinct=True), run_count=Count("messages__runs", distinct=True))
        .get(pk=pk)
    )
    return SessionDeletePlan(
        conversation=conversation,
        messages=conversation.message_count,
        runs=conversation.run_count,
        artifacts=_candidates(Artifact.objects.filter(session_id=pk)),
        active=Conversation.objects.filter(pk=pk, pk__in=busy).exists(),
    )


def artifact_delete_plan(*, conversation_id, artifact_id: str) -> CleanupCandidate:
    """The artifact `delete_artifact` would remove, with its size."""
    [pk] = _conversation_ids_checked([conversation_id])
    found = _candidates(Artifact.objects.filter(session_id=pk, artifact_id=artifact_id))
    if not found:
        raise ValidationError(f"Conversation {pk} has no artifact {artifact_id[:200]!r}.")
    return found[0]
