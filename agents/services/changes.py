"""What a scheduled turn's answer opens with: what changed in the reports
since the schedule's last run (artifacts.changes on each report's version
then and now), and the tools it skipped because no one was there to approve
them. Written in the question's language, as the agents answer in it."""

import zoneinfo

from django.utils import translation
from django.utils.formats import date_format
from django.utils.timezone import localtime
from django.utils.translation import gettext, ngettext

from artifactflow.textsearch import CJK_CHARACTER
from artifacts.changes import changes_between
from artifacts.models import ArtifactVersion
from artifacts.selectors import TASK_PLAN

from ..models import Run


def changes_since_last_run(*, run: Run, skipped: tuple[str, ...] = ()) -> str:
    """The markdown the scheduled `run`'s answer starts with."""
    previous = (
        Run.objects.filter(schedule_id=run.schedule_id, status=Run.Status.COMPLETED, finished_at__isnull=False)
        .exclude(pk=run.pk)
        .order_by("-finished_at")
        .first()
    )
    # The first run compares with what the conversation held when it began.
    since = previous.finished_at if previous else run.created_at
    language = "zh-hans" if CJK_CHARACTER.search(run.message.content) else "en"
    with translation.override(language):
        lines = _report_lines(run=run, since=since)
        if not lines:
            lines = [gettext("Nothing in the reports changed.")]
        if skipped:
            lines.append(
                ngettext(
                    "Not run: %(tools)s, which needs your approval. Allow it for this schedule to let it run unattended.",
                    "Not run: %(tools)s, which need your approval. Allow them for this schedule to let them run unattended.",
                    len(skipped),
                )
                % {"tools": gettext(", ").join(f"`{name}`" for name in skipped)}
            )
        heading = (
            gettext("What changed since the last run (%(when)s)")
            % {"when": date_format(localtime(since, _zone(run)), "SHORT_DATETIME_FORMAT")}
            if previous
            else gettext("What changed since this research was last asked")
        )
        return f"**{heading}**\n\n" + "\n".join(f"- {line}" for line in lines) + "\n\n---\n\n"


def _zone(run: Run):
    """The time zone the schedule's owner chose: the answer says its times in it."""
    try:
        return zoneinfo.ZoneInfo(run.schedule.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def _report_lines(*, run: Run, since) -> list[str]:
    written = (
        ArtifactVersion.objects.filter(run=run)
        .exclude(artifact__artifact_id=TASK_PLAN)
        .select_related("artifact")
        .order_by("artifact_id", "-version")
    )
    latest: dict[int, ArtifactVersion] = {}
    for version in written:
        latest.setdefault(version.artifact_id, version)
    lines = []
    for version in latest.values():
        title = version.title or version.artifact.title or version.artifact.artifact_id
        before = (
            ArtifactVersion.objects.filter(artifact_id=version.artifact_id, created_at__lte=since)
            .order_by("-version")
            .only("content")
            .first()
        )
        if before is None:
            lines.append(gettext("New: “%(title)s”.") % {"title": title})
            continue
        changes = changes_between(before=before.content, after=version.content)
        if not changes:
            lines.append(gettext("“%(title)s”: no section changed.") % {"title": title})
            continue
        said = [gettext("section “%(heading)s” added") % {"heading": heading} for heading in changes.added]
        for change in changes.changed:
            figures = ""
            if change.figures_gone or change.figures_added:
                figures = gettext(" (figures: %(gone)s → %(added)s)") % {
                    "gone": gettext(", ").join(change.figures_gone) or "—",
                    "added": gettext(", ").join(change.figures_added) or "—",
                }
            heading = change.heading or gettext("the opening")
            said.append(gettext("section “%(heading)s” changed") % {"heading": heading} + figures)
        said += [gettext("section “%(heading)s” gone") % {"heading": heading} for heading in changes.gone]
        lines.append(f"“{title}”: " + gettext("; ").join(said) + gettext("."))
    return lines
