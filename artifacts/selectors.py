"""Reads of a conversation's artifacts, and the views of them the pages show:
each takes the branch the page shows (`artifacts.branches`), got from a
conversation of the requesting user, so it reads nothing of anyone else's.
The current content and the list overlay the working copies of a running
turn on that branch; versions, diffs and exports are what was saved (flushed)
only. The history lists every version, each branch's. What the pane makes of
them is `artifacts.pane`'s."""

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q
from django.db.models.functions import Left
from django.utils.translation import gettext, pgettext_lazy

from artifactflow.markdown import markdown_tokens

from . import live
from .branches import Branch, branch_heads, branch_ordinal, version_is_text, version_title
from .models import Artifact, ArtifactVersion
from .paging import PAGE_CHARS
from .validators import artifact_id_valid

logger = logging.getLogger(__name__)

TASK_PLAN = "task_plan"
PREVIEW_LENGTH = 200
# The preview reads the start of the text only: enough markdown for its
# length in almost every artifact, and a list of sixty stays quick.
_PREVIEW_SOURCE = 3 * PREVIEW_LENGTH
MARKDOWN_TYPES = ("text/markdown", "text/x-markdown")
# How much of each text the list and the pane read: the pane's first page,
# and a character more to tell a text that is longer.
TEXT_START = PAGE_CHARS + 1
# A markdown checklist item: "- [ ] open" or "- [x] done".
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[([ xX])\]", re.MULTILINE)
_PREVIEW_INLINE = {"text", "code_inline"}
_PREVIEW_BREAKS = {"softbreak", "hardbreak"}


def _markdown_words(text: str) -> str:
    """The words a reader sees in rendered markdown, without its marks."""
    blocks = []
    # Raw HTML and task lists' boxes are html tokens, left out with the marks.
    for token in markdown_tokens(text, task_lists=True):
        if token.type in ("fence", "code_block"):
            blocks.append(token.content)
        elif token.type == "inline":
            words = []
            for child in token.children or []:
                if child.type in _PREVIEW_INLINE:
                    words.append(child.content)
                elif child.type in _PREVIEW_BREAKS:
                    words.append(" ")
            blocks.append("".join(words))
    return " ".join(blocks)


@dataclass(frozen=True)
class VersionName:
    """How the pages name a version: by its place among the versions of the
    branch shown, "version 4 on this branch", which a person can follow, with
    the artifact's own number beside it, "v36", which counts the versions of
    every branch and which URLs use. A version of another branch has only the
    artifact's number; a running turn's working copy only its place."""

    # The artifact's number; None for a working copy not saved yet.
    number: int | None
    # The place on the branch, 1 for the first; None for another branch's version.
    ordinal: int | None

    @property
    def on_branch(self) -> bool:
        return self.ordinal is not None

    def __str__(self) -> str:
        if self.ordinal is None:
            return gettext("v%(number)s · other branch") % {"number": self.number}
        if self.number is None:
            return gettext("version %(ordinal)s on this branch (unsaved)") % {"ordinal": self.ordinal}
        return gettext("version %(ordinal)s on this branch (v%(number)s)") % {
            "ordinal": self.ordinal,
            "number": self.number,
        }


def _names(*, versions: Iterable[ArtifactVersion], branch: Branch) -> dict[int, VersionName]:
    """The name of each of an artifact's versions, all of them given, by number."""
    names, place = {}, 0
    for version in sorted(versions, key=lambda version: version.version):
        on_branch = branch.holds(version)
        place += on_branch
        names[version.version] = VersionName(number=version.version, ordinal=place if on_branch else None)
    return names


def version_names(*, artifact: Artifact, branch: Branch) -> dict[int, VersionName]:
    """What the pages call each of the artifact's saved versions on `branch`, by number."""
    return _names(versions=artifact.versions.only("artifact", "version", "message"), branch=branch)


@dataclass(frozen=True)
class Progress:
    done: int
    total: int


@dataclass
class ArtifactView:
    artifact_id: str
    title: str
    content_type: str
    # The start of the text (all of a working copy's; none from `artifact_get`),
    # and the whole text's length: the list and the pane's first page need no
    # more (`content`).
    start: str
    length: int
    version: int
    source: str
    # The saved row, None for an artifact a running turn has not flushed yet.
    saved: Artifact | None
    # The branch's newest saved version; None as for `saved`.
    head: ArtifactVersion | None = None
    # True when the content is a running turn's unsaved working copy.
    live: bool = False
    # When the branch's version was saved; None for an unsaved working copy.
    updated_at: datetime | None = None
    # How many versions the branch has saved.
    saved_count: int = 0

    @property
    def content(self) -> str:
        """The whole text: a saved one read from the database the first time it is asked for."""
        if self.live or self.length <= len(self.start):
            return self.start
        return self.head.content

    @property
    def name(self) -> VersionName:
        """The text shown: the branch's newest version, or the working copy that will follow it."""
        if self.live:
            return VersionName(number=None, ordinal=self.saved_count + 1)
        return VersionName(number=self.version, ordinal=self.saved_count)

    @property
    def preview(self) -> str:
        """The start of the text on one line; markdown as it reads rendered."""
        source = self.start[:_PREVIEW_SOURCE]
        if self.content_type in MARKDOWN_TYPES:
            source = _markdown_words(source)
        text = " ".join(source.split())
        cut = self.length > _PREVIEW_SOURCE or len(text) > PREVIEW_LENGTH
        return text[:PREVIEW_LENGTH].rstrip() + "…" if cut else text

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
        return self.head is None or version_is_text(self.head)

    @property
    def conflict(self) -> dict | None:
        """How the branch's version was saved over another's text, if it was
        (see `artifacts.manager`): the marker the pane tells the person of."""
        conflict = self.saved.metadata.get("conflict") if self.saved else None
        return conflict if conflict and self.head and conflict["version"] == self.head.version else None


def _view(head: ArtifactVersion, working: dict | None) -> ArtifactView:
    row = head.artifact
    view = ArtifactView(
        artifact_id=row.artifact_id,
        title=version_title(head),
        content_type=row.content_type,
        start=head.text_start,
        length=head.length,
        version=head.version,
        source=row.source,
        saved=row,
        head=head,
        updated_at=head.created_at,
        saved_count=head.ordinal,
    )
    if working is not None:
        view.title, view.version = working["title"], working["version"]
        view.start, view.length = working["content"], len(working["content"])
        view.live = True
    return view


def _working_view(working: dict) -> ArtifactView:
    return ArtifactView(
        artifact_id=working["artifact_id"],
        title=working["title"],
        content_type=working["content_type"],
        start=working["content"],
        length=len(working["content"]),
        version=working["version"],
        source=working["source"],
        saved=None,
        live=True,
    )


def artifact_list(*, branch: Branch) -> list[ArtifactView]:
    """The branch's saved and unsaved artifacts, `task_plan` first, then oldest first."""
    working = live.live_get(session_id=branch.session.pk, path=branch.path, runs=branch.active_runs)
    heads = branch_heads(branch=branch, counted=True, text_start=TEXT_START)
    views = [_view(head, working.pop(head.artifact.artifact_id, None)) for head in heads]
    views += [_working_view(w) for w in working.values()]
    shown = [view for view in views if artifact_id_valid(view.artifact_id)]
    if len(shown) < len(views):
        # Written around the tools' checks (by a script, say): no URL can name
        # it, so the pane leaves it out rather than fail; `migrate` renames it.
        logger.warning("Artifacts with invalid ids left out of session %s's pane", branch.session.pk)
    return sorted(shown, key=lambda v: not v.is_task_plan)


def artifact_get(*, branch: Branch, artifact_id: str) -> ArtifactView | None:
    """The artifact on the branch, its text read when asked for (`content`):
    the pane shows the start of it from the list (`artifact_list`)."""
    working = live.live_get(session_id=branch.session.pk, path=branch.path, runs=branch.active_runs).get(artifact_id)
    heads = branch_heads(branch=branch, artifact_id=artifact_id, counted=True, text_start=0)
    if not heads:
        return _working_view(working) if working else None
    return _view(heads[0], working)


QUESTION_CHARS = 60
# How each version came to be, as the version menu says it: in English the
# words stored, which the menu always showed.
UPDATE_TYPES = {
    "create": pgettext_lazy("how a version came to be", "create"),
    "update": pgettext_lazy("how a version came to be", "update"),
    "update_fuzzy": pgettext_lazy("how a version came to be", "update_fuzzy"),
    "rewrite": pgettext_lazy("how a version came to be", "rewrite"),
    "upload": pgettext_lazy("how a version came to be", "upload"),
    "user_edit": pgettext_lazy("how a version came to be", "user_edit"),
    "restore": pgettext_lazy("how a version came to be", "restore"),
}


def artifact_versions(*, artifact: Artifact, branch: Branch) -> list[ArtifactVersion]:
    """Every saved version, newest first, each with `on_branch`, its `name`
    and `where` it was written: "turn 3" on this branch, the start of the
    other branch's question, or "" for a version on every branch; `change`
    says how it came to be."""
    # The related manager hands each row its artifact by reading the row's
    # artifact_id: deferred, that read is a query per version.
    versions = list(
        artifact.versions.order_by("-version")
        .only("artifact", "version", "update_type", "created_at", "message")
        .annotate(question=Left("message__content", QUESTION_CHARS + 1))
    )
    names = _names(versions=versions, branch=branch)
    turns = {message_id: number for number, message_id in enumerate(branch.path, start=1)}
    for version in versions:
        version.name = names[version.version]
        version.on_branch = version.name.on_branch
        version.change = str(UPDATE_TYPES.get(version.update_type, version.update_type))
        question = version.question or ""
        if len(question) > QUESTION_CHARS:
            question = question[:QUESTION_CHARS].rstrip() + "…"
        if version.message_id in turns:
            version.where = gettext("turn %(number)s") % {"number": turns[version.message_id]}
        else:
            version.where = f"“{question}”" if question else ""
    return versions


@dataclass(frozen=True)
class SavedVersion:
    artifact_id: str
    name: VersionName
    # Whether the run asked about saved it.
    by_run: bool


def run_versions(
    *, branch: Branch, run_id: int, named: Iterable[tuple[str, int]], saved_by: datetime | None
) -> list[SavedVersion]:
    """What a turn's activity links to, named on the turn's `branch`, in one
    query: every version the run saved, and those of the versions `named` (an
    artifact id and a number each, which the run read) that were saved by
    `saved_by`. An artifact deleted since, and made again, numbers its versions
    afresh: a version of it saved later is not the one the run read."""
    named = set(named)
    read = Q(pk__in=[])
    if named and saved_by is not None:
        read = Q(
            artifact__artifact_id__in={artifact_id for artifact_id, _ in named},
            version__in={number for _, number in named},
            created_at__lte=saved_by,
        )
    rows = (
        ArtifactVersion.objects.filter(Q(run_id=run_id) | read, artifact__session=branch.session)
        .annotate(ordinal=branch_ordinal(branch=branch))
        .values_list("artifact__artifact_id", "version", "message_id", "run_id", "ordinal")
    )
    return [
        SavedVersion(
            artifact_id=artifact_id,
            name=VersionName(number=number, ordinal=ordinal if branch.holds_message(message_id) else None),
            by_run=by == run_id,
        )
        for artifact_id, number, message_id, by, ordinal in rows
        if by == run_id or (artifact_id, number) in named
    ]


@dataclass(frozen=True)
class DeleteScope:
    versions: int
    # Versions of other branches, which go too.
    elsewhere: int


def artifact_delete_scope(*, artifact: Artifact, branch: Branch) -> DeleteScope:
    """What deleting the artifact takes with it, for the confirmation."""
    counts = artifact.versions.aggregate(versions=Count("pk"), elsewhere=Count("pk", filter=~branch.visible()))
    return DeleteScope(**counts)


def artifact_version_get(*, artifact: Artifact, version: int) -> ArtifactVersion | None:
    return artifact.versions.filter(version=version).first()
