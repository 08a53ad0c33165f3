"""The artifacts of a conversation branch (docs/artifacts.md).

A conversation is a tree of messages, and a branch is the path from a root to
the message the user looks at or a turn runs at. Artifacts are stored once per
conversation, as seed 000 has it: the newest text of each on `Artifact`, and
its saved versions numbered in one sequence. Every version records the message
it was written at, so a branch sees, of each artifact, its newest version
written on the branch's path. A version with no message (saved before the
first question, or before versions recorded one) is on every branch. An
artifact with no version on the path does not exist on the branch.
"""

from dataclasses import dataclass

from django.db.models import Count, OuterRef, Q, Subquery, Value
from django.db.models.functions import Left

from conversations.tree import message_path_ids

from .live import ActiveRun
from .models import Artifact, ArtifactSession, ArtifactVersion


@dataclass(frozen=True)
class Branch:
    session: ArtifactSession
    # The message the branch ends at, which new versions record; None in a
    # conversation with no message yet.
    leaf_id: int | None
    # The messages from the root down to the leaf.
    path: tuple[int, ...]
    # The session's turns in progress, which the caller asks the agents app
    # for: the branch's reads overlay their working copies (artifacts.live).
    # A turn's own branch, which writes them, has none.
    active_runs: tuple[ActiveRun, ...] = ()

    def visible(self) -> Q:
        """Which versions are on the branch, as a filter of ArtifactVersion."""
        return Q(message_id__in=self.path) | Q(message__isnull=True)

    def holds(self, version: ArtifactVersion) -> bool:
        return self.holds_message(version.message_id)

    def holds_message(self, message_id: int | None) -> bool:
        """Whether a version written at `message_id` is on the branch."""
        return message_id is None or message_id in self.path


def branch_at(*, session: ArtifactSession, message_id: int | None, active_runs: tuple[ActiveRun, ...] = ()) -> Branch:
    """The branch that ends at `message_id`."""
    path = tuple(message_path_ids(message_id=message_id))
    return Branch(session=session, leaf_id=message_id, path=path, active_runs=active_runs)


def branch_shown(*, conversation, active_runs: tuple[ActiveRun, ...] = ()) -> Branch:
    """The branch the conversation's page shows. A read: a conversation made
    without its session (every way of starting one makes it) shows an empty
    branch, whose session the first upload saves."""
    try:
        session = conversation.artifact_session
    except ArtifactSession.DoesNotExist:
        session = ArtifactSession(conversation=conversation)
    return branch_at(session=session, message_id=conversation.active_branch_id, active_runs=active_runs)


def branch_ordinal(*, branch: Branch) -> Subquery:
    """An annotation of ArtifactVersion: how many of its artifact's versions on
    the branch are as old as it or older. For a version on the branch that is
    its place there, 1 for the first: the number a person follows, where the
    artifact's own numbers skip the versions of other branches."""
    return Subquery(
        ArtifactVersion.objects.filter(
            branch.visible(), artifact=OuterRef("artifact"), version__lte=OuterRef("version")
        )
        .order_by()
        .values("artifact")
        .annotate(count=Count("pk"))
        .values("count")
    )


def branch_heads(
    *, branch: Branch, artifact_id: str | None = None, counted: bool = False, text_start: int | None = None
) -> list[ArtifactVersion]:
    """Each artifact's newest version on the branch (or only `artifact_id`'s),
    with its artifact, in the order the artifacts were created; `counted`
    adds each one's `ordinal`, which is how many versions the branch has.
    With `text_start`, each holds only that many of its first characters
    (`text_start`, beside its `length`; none with 0) and reads the rest when
    asked: a pane that shows the start of a 20 MB text reads the start, once.
    (SQLite reads a whole text to cut out its start, about 1 ms a megabyte.)"""
    newest = (
        ArtifactVersion.objects.filter(branch.visible(), artifact=OuterRef("artifact"))
        .order_by("-version")
        .values("version")[:1]
    )
    heads = (
        ArtifactVersion.objects.filter(branch.visible(), artifact__session=branch.session, version=Subquery(newest))
        .select_related("artifact")
        # The artifact's own text is the newest on any branch: not this one's.
        .defer("artifact__content")
        .order_by("artifact__created_at", "artifact_id")
    )
    if artifact_id is not None:
        heads = heads.filter(artifact__artifact_id=artifact_id)
    if counted:
        heads = heads.annotate(ordinal=branch_ordinal(branch=branch))
    if text_start is not None:
        heads = heads.defer("content").annotate(text_start=Left("content", text_start) if text_start else Value(""))
    return list(heads)


def branch_head(*, branch: Branch, artifact: Artifact) -> ArtifactVersion | None:
    """The artifact's newest version on the branch; None when it has none there."""
    return artifact.versions.filter(branch.visible()).order_by("-version").first()


def version_title(version: ArtifactVersion) -> str:
    return version.title or version.artifact.title


def version_is_text(version: ArtifactVersion) -> bool:
    """An uploaded binary file has no text in any version."""
    return not version.artifact.file or bool(version.content)
