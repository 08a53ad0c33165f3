"""What the artifact pane shows: the artifacts of the branch the page shows
(`artifacts.branches`). The current content and the list overlay the working
copies of a running turn on that branch; versions, diffs and exports are what
was saved (flushed) only. The history lists every version, each branch's."""

import difflib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Count, Q
from django.db.models.functions import Left
from django.urls import reverse
from django.utils.translation import gettext, gettext_noop, pgettext_lazy

from artifactflow.ids import ArtifactIdConverter, id_from_text
from artifactflow.markdown import markdown_tokens

from . import live
from .branches import Branch, branch_heads, branch_ordinal, version_is_text, version_title
from .models import Artifact, ArtifactVersion
from .uploads import upload_too_large_message
from .validators import artifact_id_valid

logger = logging.getLogger(__name__)

TASK_PLAN = "task_plan"
PREVIEW_LENGTH = 200
# The preview reads the start of the text only: enough markdown for its
# length in almost every artifact, and a list of sixty stays quick.
_PREVIEW_SOURCE = 3 * PREVIEW_LENGTH
MARKDOWN_TYPES = ("text/markdown", "text/x-markdown")
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
    content: str
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
    def name(self) -> VersionName:
        """The text shown: the branch's newest version, or the working copy that will follow it."""
        if self.live:
            return VersionName(number=None, ordinal=self.saved_count + 1)
        return VersionName(number=self.version, ordinal=self.saved_count)

    @property
    def preview(self) -> str:
        """The start of the text on one line; markdown as it reads rendered."""
        source = self.content[:_PREVIEW_SOURCE]
        if self.content_type in MARKDOWN_TYPES:
            source = _markdown_words(source)
        text = " ".join(source.split())
        cut = len(self.content) > _PREVIEW_SOURCE or len(text) > PREVIEW_LENGTH
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
        content=head.content,
        version=head.version,
        source=row.source,
        saved=row,
        head=head,
        updated_at=head.created_at,
        saved_count=head.ordinal,
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


def artifact_list(*, branch: Branch) -> list[ArtifactView]:
    """The branch's saved and unsaved artifacts, `task_plan` first, then oldest first."""
    working = live.live_get(session_id=branch.session.pk, path=branch.path, runs=branch.active_runs)
    heads = branch_heads(branch=branch, counted=True)
    views = [_view(head, working.pop(head.artifact.artifact_id, None)) for head in heads]
    views += [_working_view(w) for w in working.values()]
    shown = [view for view in views if artifact_id_valid(view.artifact_id)]
    if len(shown) < len(views):
        # Written around the tools' checks (by a script, say): no URL can name
        # it, so the pane leaves it out rather than fail; `migrate` renames it.
        logger.warning("Artifacts with invalid ids left out of session %s's pane", branch.session.pk)
    return sorted(shown, key=lambda v: not v.is_task_plan)


def artifact_get(*, branch: Branch, artifact_id: str) -> ArtifactView | None:
    working = live.live_get(session_id=branch.session.pk, path=branch.path, runs=branch.active_runs).get(artifact_id)
    heads = branch_heads(branch=branch, artifact_id=artifact_id, counted=True)
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


# A word keeps the spaces after it: a sentence is half as many tokens, and an
# edit is marked as the words it changed. A mark of punctuation stands alone,
# so ticking "- [ ]" marks the "x" that went in.
_WORDS = re.compile(r"\w+\s*|[^\w\s]|\s+")
# Comparing words costs up to the product of the two lines' lengths. A pair
# longer than this (in characters, both lines together), and every pair after
# a diff has compared this many, shows as changed whole, with no word marks:
# a rewrite of a 200 KB artifact still diffs in about 0.1 s.
WORD_DIFF_MAX_LINE = 10_000
WORD_DIFF_BUDGET = 100_000
# Two lines less alike than this are different lines, not an edit of one:
# marking their words would mark nearly all of them.
WORD_DIFF_MIN_RATIO = 0.4
DIFF_CONTEXT = 3

Parts = tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk" or "same"
    sign: str
    # The text in runs, each with whether it is a changed word; only a line
    # paired with the one it replaced has changed words.
    parts: Parts


def _line(kind: str, sign: str, text: str) -> DiffLine:
    return DiffLine(kind=kind, sign=sign, parts=((text, False),))


def _range(start: int, stop: int) -> str:
    """A hunk's lines as unified diffs write them: "3" for one, "3,4" for more, "2,0" for none after line 2."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _runs(tokens: list[str], opcodes, *, side: int, unchanged: str) -> Parts:
    runs = []
    for tag, *spans in opcodes:
        text = "".join(tokens[spans[side] : spans[side + 1]])
        if not text:
            continue
        if tag in ("equal", unchanged):
            runs.append((text, False))
            continue
        # The spaces after a changed word are not part of the change.
        word = text.rstrip() or text
        runs += [(word, True), (text[len(word) :], False)] if len(word) < len(text) else [(word, True)]
    return tuple(runs)


def _word_marks(old: str, new: str) -> tuple[Parts, Parts] | None:
    """The runs of both lines with the words that changed marked, or None when
    the lines are too unlike for the marks to help."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    matcher = difflib.SequenceMatcher(None, a, b)
    opcodes = matcher.get_opcodes()
    if matcher.ratio() < WORD_DIFF_MIN_RATIO:
        return None
    return _runs(a, opcodes, side=0, unchanged="insert"), _runs(b, opcodes, side=2, unchanged="delete")


def artifact_diff(*, old: str, new: str) -> list[DiffLine]:
    """The changed lines with a few lines around them, as a unified diff; a
    removed line followed by the line that replaced it has its changed words
    marked."""
    a, b = old.splitlines(), new.splitlines()
    budget = WORD_DIFF_BUDGET
    lines = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(DIFF_CONTEXT):
        lines.append(
            _line("hunk", "", f"@@ -{_range(group[0][1], group[-1][2])} +{_range(group[0][3], group[-1][4])} @@")
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [_line("same", " ", text) for text in a[i1:i2]]
                continue
            removed = [((text, False),) for text in a[i1:i2]]
            added = [((text, False),) for text in b[j1:j2]]
            # The first removed line pairs with the first added one, and so on; the rest have no partner.
            for k, (was, now) in enumerate(zip(a[i1:i2], b[j1:j2], strict=False)):
                cost = len(was) + len(now)
                if cost > WORD_DIFF_MAX_LINE or cost > budget:
                    continue
                budget -= cost
                removed[k], added[k] = _word_marks(was, now) or (removed[k], added[k])
            lines += [DiffLine(kind="del", sign="-", parts=parts) for parts in removed]
            lines += [DiffLine(kind="add", sign="+", parts=parts) for parts in added]
    return lines


def artifact_compare(*, artifact: Artifact, old_version: int | None, new_version: int | None) -> dict | None:
    """Two saved versions and the diff between them; None unless both exist."""
    old, new = (artifact_version_get(artifact=artifact, version=n) if n else None for n in (old_version, new_version))
    if old is None or new is None:
        return None
    return {"old": old, "new": new, "lines": artifact_diff(old=old.content, new=new.content)}


@dataclass(frozen=True)
class EditConflict:
    """A person's edit or restore the branch moved on from: `theirs` is the
    branch's version now, `mine` the text they meant to save."""

    theirs: ArtifactVersion
    mine: str
    # Theirs → mine, word by word.
    lines: list[DiffLine]
    # The version a restore meant to bring back; None for an edit.
    restoring: ArtifactVersion | None = None


def edit_conflict(*, theirs: ArtifactVersion, mine: str, restoring: ArtifactVersion | None = None) -> EditConflict:
    return EditConflict(
        theirs=theirs, mine=mine, lines=artifact_diff(old=theirs.content, new=mine), restoring=restoring
    )


@dataclass(frozen=True)
class SavedOver:
    """An agents' save over a person's text, as the pane tells it: `version`
    was saved over `overlapped` (theirs, by `writer`), of `kind` "overlap" or
    "dropped" (`artifacts.manager`); an older marker has no kind."""

    writer: str
    kind: str
    version: VersionName
    overlapped: VersionName | None
    # The person's text → the agents', when the person's version is still saved.
    lines: list[DiffLine] | None

    @property
    def restorable(self) -> bool:
        return self.writer == "agent" and self.lines is not None


def _saved_over(*, selected: ArtifactView, names: dict[int, VersionName]) -> SavedOver | None:
    conflict = selected.conflict
    if conflict is None or selected.live:
        return None
    number, overlapped = conflict["version"], conflict.get("overlapped")
    theirs = artifact_version_get(artifact=selected.saved, version=overlapped) if overlapped in names else None
    return SavedOver(
        writer=conflict.get("writer", ""),
        kind=conflict.get("kind", ""),
        version=names.get(number) or VersionName(number=number, ordinal=None),
        overlapped=names.get(overlapped),
        lines=artifact_diff(old=theirs.content, new=selected.head.content) if theirs else None,
    )


def artifact_default(*, artifacts: list[ArtifactView]) -> ArtifactView | None:
    """What the pane opens on when nobody chose: what the latest turn wrote,
    which is the artifact a running turn is writing or else the last saved
    (the plan changes every turn, so it is not news); then the plan, or the first."""
    others = [view for view in artifacts if not view.is_task_plan]
    writing = [view for view in others if view.live]
    if writing:
        return writing[-1]
    saved = [view for view in others if view.updated_at is not None]
    if saved:
        return max(saved, key=lambda view: view.updated_at)
    return artifacts[0] if artifacts else None


def _page_url(*, conversation_url: str, selected: ArtifactView | None, version, diff) -> str:
    if selected is None:
        return conversation_url
    params = {"artifact": selected.artifact_id}
    if diff:
        params.update({"from": diff["old"].version, "to": diff["new"].version})
    elif version:
        params["version"] = version.version
    return f"{conversation_url}?{urlencode(params)}"


def pane_context(
    *,
    branch: Branch,
    selected: ArtifactView | None = None,
    version=None,
    diff=None,
    notice: str = "",
    restored: tuple[int, int] | None = None,
    conflict: EditConflict | None = None,
    merging: ArtifactVersion | None = None,
) -> dict:
    """What the artifact pane template needs: the branch's list, the artifact
    shown (the one chosen, else `artifact_default`'s), its saved versions, and
    the URL of the conversation page that shows the same (`page_url`).
    `restored` is the (old, new) numbers of a restore just made, for its
    notice; `conflict` an edit the branch moved on from, for the person to
    choose, and `merging` their version, which the editor merges with."""
    session = branch.session
    artifacts = artifact_list(branch=branch)
    conversation_url = reverse("conversation-detail", args=[session.pk])
    # A pane nobody chose for follows the newest artifact when it refreshes; a chosen one stays.
    chosen = selected is not None
    page_url = _page_url(conversation_url=conversation_url, selected=selected, version=version, diff=diff)
    if selected is None:
        selected = artifact_default(artifacts=artifacts)
    versions = artifact_versions(artifact=selected.saved, branch=branch) if selected and selected.saved else []
    # The version shown and the pair compared are rows of the list, named as it names them.
    names = {v.version: v.name for v in versions}
    theirs = (conflict.theirs, *filter(None, [conflict.restoring])) if conflict else (merging,)
    for shown in (version, *((diff["old"], diff["new"]) if diff else ()), *theirs):
        if shown is not None:
            shown.name = names[shown.version]
            shown.on_branch = shown.name.on_branch
    return {
        "conversation_id": session.pk,
        "conversation_url": conversation_url,
        "page_url": page_url,
        "artifacts": artifacts,
        "selected": selected,
        "chosen": chosen,
        "versions": versions,
        # What the version lists select: the version shown, and the pair
        # compared, else this branch's version and the one before it.
        "version_selected": version.version if version else selected and selected.version,
        "compare_from": diff["old"].version
        if diff
        else _compare_from(versions=versions, head=selected.head if selected else None),
        "compare_to": diff["new"].version if diff else selected and selected.version,
        "shown_version": version,
        "diff": diff,
        "edit_conflict": conflict,
        "merging": merging,
        "pane_notice": notice,
        "restored": {"from": names[restored[0]], "to": names[restored[1]]} if restored else None,
        "saved_over": _saved_over(selected=selected, names=names) if selected and selected.saved else None,
        # The browser refuses a file over the limit before sending it.
        "upload_max_bytes": settings.ARTIFACT_UPLOAD_MAX_BYTES,
        "upload_too_large": upload_too_large_message(),
    }


def _compare_from(*, versions: list[ArtifactVersion], head: ArtifactVersion | None) -> int | None:
    """What Compare offers to set the branch's version against: the version
    before it on the branch, else the one before it of all."""
    if head is None:
        return None
    older = [version for version in versions if version.version < head.version]
    before = next((version for version in older if version.on_branch), older[0] if older else None)
    return before.version if before else None


NO_SUCH_ARTIFACT = gettext_noop(
    "The artifact this link names is not on this branch of the conversation; showing the newest."
)
NO_SUCH_VERSION = gettext_noop("This link names a version that is not saved; showing the current text.")
NO_SUCH_DIFF = gettext_noop("This link compares versions that are not saved; showing the current text.")


def pane_context_for_page(*, branch: Branch, artifact_id: str, version: str, diff_from: str, diff_to: str) -> dict:
    """The pane of a conversation page's URL, `?artifact=…`, with `&version=…`
    or `&from=…&to=…` for a diff. A link outlives what it names, so one naming
    nothing shows the nearest there is with a notice, never an error page."""
    if not artifact_id:
        return pane_context(branch=branch)
    selected = _artifact_named(branch=branch, artifact_id=artifact_id)
    if selected is None:
        return pane_context(branch=branch, notice=gettext(NO_SUCH_ARTIFACT))
    if diff_from or diff_to:
        numbers = {"old_version": id_from_text(diff_from), "new_version": id_from_text(diff_to)}
        diff = artifact_compare(artifact=selected.saved, **numbers) if selected.saved else None
        if diff is None:
            return pane_context(branch=branch, selected=selected, notice=gettext(NO_SUCH_DIFF))
        return pane_context(branch=branch, selected=selected, diff=diff)
    if version:
        number = id_from_text(version)
        shown = artifact_version_get(artifact=selected.saved, version=number) if selected.saved and number else None
        if shown is None:
            return pane_context(branch=branch, selected=selected, notice=gettext(NO_SUCH_VERSION))
        return pane_context(branch=branch, selected=selected, version=shown)
    return pane_context(branch=branch, selected=selected)


def pane_context_for_branch_change(*, branch: Branch, artifact_id: str) -> dict:
    """The pane once the page shows another branch: still the artifact it
    showed (`artifact_id`, its current text) when the branch has it."""
    return pane_context(branch=branch, selected=_artifact_named(branch=branch, artifact_id=artifact_id))


def _artifact_named(*, branch: Branch, artifact_id: str) -> ArtifactView | None:
    """The artifact a URL names, if the branch has it. Only what the URL
    converter lets through to the artifact views is looked for: never a NUL,
    which the database would refuse."""
    if not re.fullmatch(ArtifactIdConverter.regex, artifact_id):
        return None
    return artifact_get(branch=branch, artifact_id=artifact_id)
