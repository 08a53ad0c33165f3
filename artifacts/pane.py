"""The artifact pane's template context: which artifact it shows (the one
chosen, else `artifact_default`'s), its versions, a diff, a conflict to
resolve, and the URL of the conversation page that shows the same. It reads
through `artifacts.selectors` and diffs through `artifacts.diff`; the views
render what it returns."""

import re
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse
from django.utils.translation import gettext, gettext_noop

from artifactflow.citations import CITATIONS_KEY, citations_unfound_mark
from artifactflow.ids import ArtifactIdConverter, id_from_text
from conversations.models import Message

from .branches import Branch
from .diff import DiffLine, artifact_diff
from .models import Artifact, ArtifactVersion
from .paging import TextPage, page_of, text_first_page
from .rendering import page_render
from .selectors import (
    MARKDOWN_TYPES,
    TEXT_START,
    ArtifactView,
    VersionName,
    artifact_get,
    artifact_list,
    artifact_version_get,
    artifact_versions,
)
from .uploads import upload_too_large_message


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
    else:
        # The list holds the start of its text, which the first page shows
        # (one it leaves out, of an id no URL could name, is read whole).
        listed = next((view for view in artifacts if view.artifact_id == selected.artifact_id), None)
        selected = listed or replace(selected, start=selected.content[:TEXT_START])
    versions = artifact_versions(artifact=selected.saved, branch=branch) if selected and selected.saved else []
    # The version shown and the pair compared are rows of the list, named as it names them.
    names = {v.version: v.name for v in versions}
    theirs = (conflict.theirs, *filter(None, [conflict.restoring])) if conflict else (merging,)
    page = None
    if selected:
        page = (
            text_first_page(text=version.content)
            if version
            else page_of(part=selected.start, start=0, total=selected.length)
        )
    page_version = version.version if version else selected and not selected.live and selected.version
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
        # The text shown starts with its first page; the next ones are the saved
        # version's (`page_version`; a working copy has none).
        **(page_context(selected=selected, page=page, version=page_version) if selected else {}),
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


def page_context(*, selected: ArtifactView, page: TextPage, version: int | None) -> dict:
    """A page of the text shown, and its HTML, rendered when the template
    shows it (an editor or a diff shows none): a saved `version`'s once."""
    prose = reads_as_prose(selected)

    def render():
        html = page_render(page=page, content_type=selected.content_type, prose=prose, saved=bool(version))
        if not version or selected.saved is None or selected.content_type not in MARKDOWN_TYPES:
            return html
        # The citation check of the turn that saved this version (agents.services.citations).
        check = (
            Message.objects.filter(artifact_versions__artifact=selected.saved, artifact_versions__version=version)
            .values_list(f"metadata__{CITATIONS_KEY}", flat=True)
            .first()
        )
        return citations_unfound_mark(html, check=check, where=selected.artifact_id)

    return {"selected": selected, "text_page": page, "page_version": version, "page_html": render}


def reads_as_prose(view: ArtifactView) -> bool:
    """Text read out of a PDF is paragraphs, shown wrapped like a page, not
    as a plain file's monospace lines."""
    saved = view.saved
    return bool(
        saved and view.content_type == "text/plain" and saved.metadata.get("original_name", "").lower().endswith(".pdf")
    )


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
