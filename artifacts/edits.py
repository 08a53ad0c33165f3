"""What people changed in a branch's artifacts since an agent last saved them.

The lead agent is told of each such edit in its prompt (agents.context), so
that it builds on the person's text instead of over it; and a turn that saves
an artifact without the lines a person wrote there is caught (artifacts.manager)
and the person is told in the pane.

A person's edit is a version no run wrote other than an upload: an edit or a
restore in the pane, or a choice made in a conflict. An upload is the person's
material too, but it is where the artifact starts, not a change to it.
"""

import difflib
import re
from dataclasses import dataclass, field
from datetime import datetime

from .branches import Branch
from .models import ArtifactVersion

UPLOAD = "upload"
# The lines of a diff the prompt shows in full; a longer one is summed up.
DIFF_MAX_LINES = 12
DIFF_MAX_CHARS = 1_200
# Comparing lines costs up to the product of the two texts' line counts: a
# pair longer than this is reported as changed, without counting lines.
COMPARE_MAX_LINES = 20_000
# A kept line shorter than this (a blank, a "---", a bullet's mark) says
# nothing about whether the person's text survived.
KEPT_MIN_CHARS = 4
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


@dataclass
class PeopleEdit:
    """The person's edits of one artifact since an agent last saved it."""

    artifact_id: str
    # The version the edits started from (an agent's, or the upload) and the
    # branch's newest, which the last edit made.
    since_version: int
    version: int
    at: datetime
    added: int = 0
    removed: int = 0
    # The headings of the sections the edits changed, in the order they come.
    sections: list[str] = field(default_factory=list)
    # The edits as +/- lines, when short enough to show.
    diff: str = ""
    # The lines the person wrote, which a later save must keep.
    lines: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        counts = f"+{self.added} line{'s' if self.added != 1 else ''}, −{self.removed}"
        if not self.sections:
            return counts
        return counts + " in " + ", ".join(f"“{section}”" for section in self.sections[:3])

    def dropped_from(self, content: str) -> list[str]:
        """The person's lines that `content` no longer holds."""
        return [line for line in self.lines if line not in content]


def people_edits(*, branch: Branch) -> dict[str, PeopleEdit]:
    """For each artifact of the branch whose newest versions are people's
    edits, what they changed since the version before them. Two queries: the
    branch's version numbers, then the two texts of each edited artifact."""
    rows = (
        ArtifactVersion.objects.filter(branch.visible(), artifact__session=branch.session)
        .order_by("artifact_id", "version")
        .values_list("pk", "artifact__artifact_id", "version", "run_id", "update_type", "created_at")
    )
    runs: dict[str, list] = {}
    for row in rows:
        runs.setdefault(row[1], []).append(row)
    pairs = {}
    for artifact_id, versions in runs.items():
        edits = _trailing_edits(versions)
        if edits and len(edits) < len(versions):
            pairs[artifact_id] = (versions[-len(edits) - 1], edits[-1])
    if not pairs:
        return {}
    wanted = [pk for since, head in pairs.values() for pk in (since[0], head[0])]
    texts = dict(ArtifactVersion.objects.filter(pk__in=wanted).values_list("pk", "content"))
    # Edits that came back to the text they started from changed nothing.
    return {
        artifact_id: _edit(artifact_id, since=since, head=head, old=texts[since[0]], new=texts[head[0]])
        for artifact_id, (since, head) in pairs.items()
        if texts[since[0]] != texts[head[0]]
    }


def _trailing_edits(versions: list) -> list:
    """The versions after the last one a run wrote or an upload made."""
    count = 0
    for _pk, _artifact_id, _version, run_id, update_type, _at in reversed(versions):
        if run_id is not None or update_type == UPLOAD:
            break
        count += 1
    return versions[len(versions) - count :]


def _edit(artifact_id: str, *, since, head, old: str, new: str) -> PeopleEdit:
    edit = PeopleEdit(artifact_id=artifact_id, since_version=since[2], version=head[2], at=head[5])
    a, b = old.splitlines(), new.splitlines()
    if len(a) > COMPARE_MAX_LINES or len(b) > COMPARE_MAX_LINES:
        edit.added, edit.removed = len(b), len(a)
        return edit
    shown = []
    headings = _headings(b)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        # Blank lines are layout, not words the person wrote.
        removed = [line for line in a[i1:i2] if line.strip()]
        added = [(j, line) for j, line in enumerate(b[j1:j2], start=j1) if line.strip()]
        edit.removed += len(removed)
        edit.added += len(added)
        where = added[0][0] if added else min(j1, len(b) - 1)
        section = headings[where] if where >= 0 else ""
        if section and section not in edit.sections:
            edit.sections.append(section)
        shown += [f"- {line}" for line in removed] + [f"+ {line}" for _, line in added]
        edit.lines += [line.strip() for _, line in added if len(line.strip()) >= KEPT_MIN_CHARS]
    text = "\n".join(shown)
    if len(shown) <= DIFF_MAX_LINES and len(text) <= DIFF_MAX_CHARS:
        edit.diff = text
    return edit


def _headings(lines: list[str]) -> list[str]:
    """For each line, the markdown heading of the section it is in ("" before the first)."""
    current, found = "", []
    for line in lines:
        match = _HEADING.match(line)
        if match:
            current = match.group(1)
        found.append(current)
    return found
