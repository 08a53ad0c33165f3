"""A run's steps: who did what, with which tool, and how it went, subagents'
steps under their hand-over. The run's projection (agents.projection) folds
its events into them, with the helpers here; the page lists them while a run
works and the activity under a finished answer shows them again with what
each tool found, so both tell one story.

Tool results are read from the data the tools returned with them (the
`output` of tool_complete, agents.event_schema.ToolOutput). Events written
before tools returned it have only the XML the model was shown: that is
read, never trusted, and a result of an unknown shape, or one cut short,
stays plain text.
"""

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import unescape

from django.utils.translation import gettext, gettext_lazy, ngettext, pgettext_lazy

from artifactflow.ids import ArtifactIdConverter
from artifactflow.markdown import markdown_render
from artifacts.selectors import VersionName
from library.selectors import library_page_url, library_url_id, library_url_passage, snapshot_page_url

from .config import CALL_SUBAGENT
from .models import RunEvent
from .state import PermissionDecision
from .tools.search import WEB_SEARCH, search_provider
from .tools.web import WEB_FETCH, fetch_target

# What a step is: a subagent's delegated work (its own steps nested under it), a
# tool call, a compaction, a model call asked again, a worker's death and the
# resumption after it, a model call's thinking (the activity's only).
AGENT, TOOL, COMPACTION, RETRY, RESUMED, THINKING = "agent", "tool", "compaction", "retry", "resumed", "thinking"
# How it went.
RUNNING, OK, FAILED, DENIED, STOPPED = "running", "ok", "failed", "denied", "stopped"

# Lazy: said in the language of the page that shows them.
STATUS_WORDS = {
    RUNNING: pgettext_lazy("step status", "working"),
    OK: pgettext_lazy("step status", "ok"),
    FAILED: pgettext_lazy("step status", "failed"),
    DENIED: pgettext_lazy("step status", "not run"),
    STOPPED: pgettext_lazy("step status", "stopped"),
}
PERMISSION_WORDS = {
    "asked": gettext_lazy("waiting for your approval"),
    PermissionDecision.APPROVE: gettext_lazy("you approved it"),
    PermissionDecision.ALWAYS: gettext_lazy("you allowed it from now on"),
    PermissionDecision.DENY: gettext_lazy("you denied it"),
    PermissionDecision.EXPIRED: gettext_lazy("nobody answered in time"),
    "unanswered": gettext_lazy("the run ended before an answer"),
}
# The same said to a reader the conversation is shared with: the question was the owner's.
READER_PERMISSION_WORDS = {
    **PERMISSION_WORDS,
    "asked": gettext_lazy("waiting for the owner's approval"),
    PermissionDecision.APPROVE: gettext_lazy("the owner approved it"),
    PermissionDecision.ALWAYS: gettext_lazy("the owner allowed it from now on"),
    PermissionDecision.DENY: gettext_lazy("the owner denied it"),
}
# The status line for each artifact tool: "<agent> · writing “<title>”".
_ARTIFACT_VERBS = {
    "create_artifact": gettext_lazy("%(agent)s · writing %(subject)s"),
    "update_artifact": gettext_lazy("%(agent)s · editing %(subject)s"),
    "rewrite_artifact": gettext_lazy("%(agent)s · rewriting %(subject)s"),
    "read_artifact": gettext_lazy("%(agent)s · reading %(subject)s"),
}
SUBJECT_CHARS = 60
# A URL longer than this is named on a step's line by the host it goes to.
URL_CHARS = 200
EXCERPT_CHARS = 300
OUTCOME_CHARS = 120
# How much of a model's thinking a page shows: a thinking of 100,000
# characters must not weigh the thread down. The start is shown, as it streamed.
THINKING_SHOWN_CHARS = 20_000


@dataclass(frozen=True)
class Thinking:
    """A model call's thinking as a page shows it: plain text, folded away
    once the model answers."""

    text: str
    # The model is thinking still: shown open, as it streams.
    live: bool = False
    # How long it thought, once known.
    ms: int | None = None

    @property
    def shown(self) -> str:
        return self.text[:THINKING_SHOWN_CHARS]

    @property
    def cut(self) -> bool:
        return len(self.text) > THINKING_SHOWN_CHARS

    @property
    def cut_note(self) -> str:
        return gettext("Only the first %(count)s characters of the thinking are shown.") % {
            "count": f"{THINKING_SHOWN_CHARS:,}"
        }

    @property
    def summary(self) -> str:
        if self.live:
            return gettext("Thinking…")
        if self.ms is None:
            return gettext("Thinking")
        return gettext("Thought for %(duration)s") % {"duration": _duration_text(timedelta(milliseconds=self.ms))}


@dataclass(frozen=True)
class Source:
    """A page a tool found or read, as the activity lists it."""

    title: str
    url: str
    excerpt: str = ""
    # What the tool read of it, for the page to mark: a search hit's snippet
    # (a fetch read the whole page).
    passage: str = ""
    # Where in it: a library passage's headings, and a PDF's page.
    section: str = ""
    page: int | None = None
    # The snapshot of a web page as web_fetch read it.
    snapshot: int | None = None

    @property
    def href(self) -> str:
        """The URL a browser should open: a web page's snapshot, else the page
        itself, a library document's page (marking the passage), and none for
        anything else (a javascript: or data: URL planted in a search result)."""
        document_id = library_url_id(self.url)
        if document_id is not None:
            return library_page_url(document_id=document_id, passage=self.passage, number=library_url_passage(self.url))
        if not self.url.lower().startswith(("http://", "https://")):
            return ""
        return snapshot_page_url(snapshot_id=self.snapshot) if self.snapshot is not None else self.url


@dataclass(frozen=True)
class ArtifactRef:
    """An artifact a step wrote or read, and which version of it."""

    artifact_id: str
    title: str = ""
    version: int | None = None
    # True when `version` counts the run's working copy (what it wrote, and a
    # read of what it wrote), which the turn saves at its end under a number
    # of its own: only the saved version can be linked to, and `saved` names
    # it once agents.selectors has looked it up.
    working: bool = False
    saved: VersionName | None = None
    # Why a ref that names a version has none to link to.
    missing: str = ""

    @property
    def linkable(self) -> bool:
        """Whether the pane's URL can carry the id: an odd one in a hand-written
        or old event is shown as text rather than failing the page."""
        return re.fullmatch(ArtifactIdConverter.regex, self.artifact_id) is not None


@dataclass
class Step:
    """One thing an agent did, with its result once it is finished.

    `subject` says in a few words what it is about (a query, a page, an
    artifact, a subagent's instruction); the result fields are what the
    folded activity shows of the tool's answer."""

    kind: str
    agent: str
    tool: str = ""
    subject: str = ""
    # Who delegated a subagent's work.
    by: str = ""
    # A subagent's whole instruction, or why the model was asked again.
    detail: str = ""
    params: dict = field(default_factory=dict)
    status: str = RUNNING
    # The result in a few words: "4 results", "reported back", an error's first line.
    outcome: str = ""
    # A permission question about this call: "asked", then the decision.
    permission: str = ""
    # On the run's work clock (StepFold.work), which stops while a person is asked.
    started: timedelta = timedelta(0)
    duration: timedelta | None = None
    children: list["Step"] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    page: Source | None = None
    artifact: ArtifactRef | None = None
    # The result too long for the model's context, kept as an artifact.
    stored: ArtifactRef | None = None
    # Markdown: a subagent's report or a compaction's summary.
    body: str = ""
    # Plain text: an error message, or a result of no shape we read.
    text: str = ""
    # What the engine told the model along with the result.
    notes: list[str] = field(default_factory=list)
    # A model call's thinking (a THINKING step).
    thinking: Thinking | None = None

    @property
    def is_running(self) -> bool:
        return self.status == RUNNING

    @property
    def is_asking(self) -> bool:
        return self.permission == "asked"

    @property
    def status_text(self) -> str:
        return self._status_text(words=PERMISSION_WORDS)

    @property
    def reader_status_text(self) -> str:
        return self._status_text(words=READER_PERMISSION_WORDS)

    @property
    def permission_text(self) -> str:
        return str(PERMISSION_WORDS.get(self.permission, self.permission))

    @property
    def summary(self) -> str:
        """How it went, for the end of its line: "4 results · 120 ms"; a step
        that did not simply work says so first."""
        return self._summary(words=PERMISSION_WORDS)

    @property
    def reader_summary(self) -> str:
        """The summary for a reader it is shared with, who was not the one asked."""
        return self._summary(words=READER_PERMISSION_WORDS)

    def _status_text(self, *, words: dict) -> str:
        # A call held for a person's answer is not working.
        return str(words["asked"] if self.is_asking else STATUS_WORDS[self.status])

    def _summary(self, *, words: dict) -> str:
        if self.is_running:
            return self._status_text(words=words)
        parts = [] if self.status == OK else [self._status_text(words=words)]
        permission = str(words.get(self.permission, self.permission)) if self.permission else ""
        parts += [self.outcome, permission, self.duration_text]
        return " · ".join(part for part in parts if part)

    @property
    def shows_params(self) -> bool:
        """Whether the activity lists the call's parameters: the line and the
        result say all of a search's, a fetch's or an artifact call's."""
        return self.kind == TOOL and bool(self.params) and self.tool not in (WEB_SEARCH, WEB_FETCH, *_ARTIFACT_VERBS)

    @property
    def param_pairs(self) -> list[tuple[str, object]]:
        """(name, value) of each parameter, for templates: the names are the
        model's, and a template's `params.items` is a lookup of the key "items" first."""
        return list(self.params.items())

    @property
    def duration_text(self) -> str:
        return _duration_text(self.duration) if self.duration is not None else ""

    @property
    def body_html(self) -> str:
        # The project's renderer: raw HTML off, unsafe links refused, then nh3.
        return markdown_render(self.body)


@dataclass
class StepFold:
    """A run's steps, folded from its events, and what folding needs to go on."""

    steps: list[Step] = field(default_factory=list)
    # The seq of the last event that changed the steps: a page that was sent
    # them after this event has them.
    changed_seq: int = 0
    # The run's time between its events, split into working and waiting for a
    # person to answer a permission question, which no duration counts.
    work: timedelta = timedelta(0)
    wait: timedelta = timedelta(0)
    tool_calls: int = 0
    # Each agent's call in progress (the lead's while its subagent works).
    running: dict[str, Step] = field(default_factory=dict)
    # Each working subagent's step, under which its own steps go.
    groups: dict[str, Step] = field(default_factory=dict)
    asking: Step | None = None
    # Titles seen in this run by URL and artifact id, to name what a later call reads.
    titles: dict[str, str] = field(default_factory=dict)
    # The artifacts the run wrote (its working copies), and those its ending failed to save.
    written: set[str] = field(default_factory=set)
    unsaved: set[str] = field(default_factory=set)
    last_at: datetime | None = None
    # Each model call's thinking as a step of its own: the Activity's, not the live list's.
    thinking_steps: bool = False

    @property
    def work_text(self) -> str:
        return _duration_text(self.work)

    @property
    def wait_text(self) -> str:
        return _duration_text(self.wait)


def _duration_text(duration: timedelta) -> str:
    ms = duration // timedelta(milliseconds=1)
    if ms < 1000:
        return gettext("%(ms)s ms") % {"ms": ms}
    if ms < 60_000:
        return gettext("%(seconds)s s") % {"seconds": f"{ms / 1000:.1f}"}
    minutes, seconds = divmod(round(ms / 1000), 60)
    return gettext("%(minutes)s min %(seconds)s s") % {"minutes": minutes, "seconds": seconds}


def step_call_start(fold: StepFold, agent: str, data: dict) -> Step:
    """The step of a tool call, from its tool_start or, for one that needs
    approval, its permission_request: both carry the tool and its params."""
    tool = str(data.get("tool", ""))
    params = data.get("params") if isinstance(data.get("params"), dict) else {}
    if tool == CALL_SUBAGENT:
        instruction = str(params.get("instruction", ""))
        step = Step(AGENT, str(params.get("agent", "")), by=agent, subject=quoted(instruction), detail=instruction)
    else:
        step = Step(TOOL, agent, tool=tool, subject=_subject(tool, params, fold.titles), params=params)
        if tool in _ARTIFACT_VERBS and params.get("title"):
            fold.titles[str(params.get("id", ""))] = str(params["title"])
    step.started = fold.work
    fold.tool_calls += 1
    fold_place(fold, agent).append(step)
    fold.running[agent] = step
    return step


def fold_clock_advance(fold: StepFold, event: RunEvent) -> None:
    """Adds the time since the previous event to work, or to wait while a
    permission question is open (its answer is the event that ends the wait).
    Waiting for a slot (admission's events) is neither: the clock starts again after it."""
    if event.type == RunEvent.Type.METADATA and ("ahead" in event.data or event.data.get("admitted")):
        fold.last_at = None
        return
    if fold.last_at is not None and event.created_at is not None:
        elapsed = max(event.created_at - fold.last_at, timedelta(0))
        if fold.asking is not None:
            fold.wait += elapsed
        else:
            fold.work += elapsed
    fold.last_at = event.created_at


def fold_place(fold: StepFold, agent: str) -> list[Step]:
    """Where an agent's steps go: under its hand-over for a subagent at work,
    else the run's own list."""
    group = fold.groups.get(agent)
    return group.children if group is not None else fold.steps


def step_finish(fold: StepFold, step: Step, status: str, *, outcome: str = "") -> None:
    step.status, step.duration = status, fold.work - step.started
    step.outcome = outcome or step.outcome


def shortened(text, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def quoted(text, limit: int = SUBJECT_CHARS) -> str:
    return f"“{shortened(text, limit)}”"


def _titles_seen(fold: StepFold, sources: list[Source]) -> None:
    for source in sources:
        if source.title:
            fold.titles[source.url] = source.title
            # A library passage's document (library://9 of library://9#3) has its title.
            fold.titles.setdefault(source.url.partition("#")[0], source.title)


def _subject(tool: str, params: dict, titles: dict[str, str]) -> str:
    """A call's parameters in a few words, naming what it reads or writes by
    the title this run has seen for it."""
    if tool == WEB_SEARCH:
        return quoted(params.get("query", ""))
    if tool == WEB_FETCH:
        url = str(params.get("url", "")).strip()
        return f"{quoted(titles[url])} {_url_shown(url)}" if titles.get(url) else _url_shown(url)
    if tool in _ARTIFACT_VERBS:
        artifact_id = str(params.get("id", ""))
        title = params.get("title") or titles.get(artifact_id)
        return quoted(title) if title else artifact_id
    return shortened(", ".join(f"{name}={value}" for name, value in params.items()), SUBJECT_CHARS)


def _url_shown(url: str) -> str:
    """A URL as a line shows it: whole when short; a long one, which could
    bury its host past any cut, by the host it goes to (none when what the
    event kept of it names no host web_fetch would go to)."""
    if len(url) <= URL_CHARS:
        return url
    target = fetch_target(url)
    return (
        gettext("a long URL on %(host)s") % {"host": target.host}
        if target.host and not target.refused
        else gettext("a long URL")
    )


def status_line(step: Step | None, fold: StepFold, agent: str) -> str:
    """The status line for a call that starts or runs now."""
    if step is None:
        return gettext("%(agent)s · working") % {"agent": agent}
    params = step.params
    if step.kind == AGENT:
        return gettext("%(by)s · handing over to %(agent)s") % {"by": step.by, "agent": step.agent}
    if step.tool == WEB_SEARCH:
        query = quoted(params.get("query", ""))
        if search_provider() == "local":
            return gettext("%(agent)s · searching the team library for %(query)s") % {"agent": agent, "query": query}
        return gettext("%(agent)s · searching the web for %(query)s") % {"agent": agent, "query": query}
    if step.tool == WEB_FETCH:
        url = str(params.get("url", "")).strip()
        title = fold.titles.get(url)
        shown = _url_shown(url)
        if title:
            return gettext("%(agent)s · reading %(title)s (%(url)s)") % {
                "agent": agent,
                "title": quoted(title),
                "url": shown,
            }
        return gettext("%(agent)s · reading %(url)s") % {"agent": agent, "url": shown}
    if step.tool in _ARTIFACT_VERBS:
        return _ARTIFACT_VERBS[step.tool] % {"agent": agent, "subject": step.subject}
    return gettext("%(agent)s · running %(tool)s") % {"agent": agent, "tool": step.tool}


# --- reading tool results -----------------------------------------------------------
# Markdown emphasis and heading marks in snippets and page text, which the
# activity shows as plain text (the library marks search matches with **).
_MARKUP = re.compile(r"\*\*|__|(?:^|(?<=\s))#{1,6}(?=\s)")


def _excerpt(text, limit: int) -> str:
    return shortened(_MARKUP.sub("", str(text)), limit)


def step_result_read(fold: StepFold, step: Step, data: dict) -> None:
    """What a tool's result says: sources, a page, an artifact, a report or
    an error, as its output gives them."""
    change = data.get("artifact_change")
    if isinstance(change, dict) and change.get("artifact_id"):
        version = change.get("version")
        step.artifact = ArtifactRef(
            str(change["artifact_id"]),
            str(change.get("title") or ""),
            version if isinstance(version, int) else None,
            working=True,
        )
        fold.written.add(step.artifact.artifact_id)
        if change.get("title"):
            fold.titles[step.artifact.artifact_id] = step.artifact.title
    output = data.get("output")
    if not isinstance(output, dict):
        _result_text_read(fold, step, data)
        return
    notes = data.get("notes")
    step.notes = [str(note) for note in notes] if isinstance(notes, list) else []
    if data.get("stored_as"):
        step.stored = ArtifactRef(str(data["stored_as"]), working=True)
        fold.written.add(step.stored.artifact_id)
    match output.get("kind"):
        case "error":
            step.text = str(output.get("message", "")).strip()
        case "sources" if output.get("sources"):
            step.sources = [
                Source(
                    _excerpt(source.get("title", ""), 200),
                    str(source.get("url", "")).strip(),
                    excerpt := _excerpt(source.get("excerpt", ""), EXCERPT_CHARS),
                    passage=excerpt,
                    section=_excerpt(source.get("section", ""), 200),
                    page=page if isinstance(page := source.get("page"), int) else None,
                )
                for source in output["sources"]
            ]
            _titles_seen(fold, step.sources)
        case "sources":
            step.text = str(output.get("message", "")).strip()
        case "page":
            source = output.get("source") or {}
            url, title = str(source.get("url", "")), str(source.get("title", ""))
            step.page = Source(
                title,
                url,
                _excerpt(source.get("excerpt", ""), EXCERPT_CHARS),
                section=_excerpt(source.get("section", ""), 200),
                snapshot=snapshot if isinstance(snapshot := source.get("snapshot"), int) else None,
            )
            if title:
                fold.titles[url] = title
                step.subject = _subject(step.tool, step.params, fold.titles)
        case "artifact" if step.artifact is None:
            # A read: the changing tools named what they wrote in artifact_change.
            artifact_id, version = str(output.get("artifact_id", "")), output.get("version")
            # Without a version asked for, a read of what the run wrote reads its working copy.
            working = artifact_id in fold.written and step.params.get("version") is None
            step.artifact = ArtifactRef(
                artifact_id,
                str(output.get("title", "")),
                version if isinstance(version, int) else None,
                working=working,
            )
        case "no_report":
            # The lead's result says why; the subagent said nothing.
            step.body = step.body or str(output.get("message", ""))


# --- reading the text of older events --------------------------------------------------
# The XML shapes the tools write for the model (agents/tools/search.py, agents/tools/web.py,
# agents/tools/artifacts.py, agents/tools/base.py, the engine's
# subagent_result and stored_result), for tool_complete events from before they
# carried an output. The event keeps the first 2,000 characters, so a result may
# stop anywhere: every pattern takes what is there.

_OPENING = re.compile(r"\s*<(\w+)((?:\s+[\w:-]+=(?:\"[^\"]*\"|'[^']*'))*)\s*>")
_ATTRIBUTE = re.compile(r"([\w:-]+)=(?:\"([^\"]*)\"|'([^']*)')")
_HIT = re.compile(
    r"<result>\s*<title>(.*?)</title>\s*<url>(.*?)</url>\s*(?:<snippet>(.*?)(?:</snippet>|$))?", re.DOTALL
)
_CONTENT = re.compile(r"<content>(.*?)(?:</content>|$)", re.DOTALL)
_PREVIEW = re.compile(r"<preview>(.*?)(?:…</preview>|</preview>|$)", re.DOTALL)
_ERROR_MESSAGE = re.compile(r"<message>(.*?)(?:</message>|$)", re.DOTALL)
_NOTE = re.compile(r"\n<note>(.*?)</note>", re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def _attributes(text: str) -> dict[str, str]:
    return {name: unescape(double or single) for name, double, single in _ATTRIBUTE.findall(text)}


def _plain(text: str, limit: int) -> str:
    return _excerpt(unescape(text), limit)


def _result_text_read(fold: StepFold, step: Step, data: dict) -> None:
    """What an older event's result says, read from the XML the model was
    shown. A result of another shape, or one cut before anything could be
    read, stays plain text."""
    result = data.get("result") if isinstance(data.get("result"), str) else ""
    result, _, notes = result.partition("\n<note>")
    step.notes = [unescape(note) for note in _NOTE.findall("\n<note>" + notes)] if notes else []
    opening = _OPENING.match(result)
    tag, attributes = (opening[1], _attributes(opening[2])) if opening else ("", {})
    if tag == "stored_result":
        step.stored = ArtifactRef(attributes.get("artifact", ""), working=True)
        fold.written.add(step.stored.artifact_id)
        # The preview is the start of the result itself, escaped once more.
        preview = _PREVIEW.search(result)
        result = unescape(preview[1]) if preview else ""
        opening = _OPENING.match(result)
        tag, attributes = (opening[1], _attributes(opening[2])) if opening else ("", {})
    inner = result[opening.end() :] if opening else ""
    if tag == "error":
        message = _ERROR_MESSAGE.search(inner)
        step.text = unescape(message[1] if message else _TAG.sub("", inner)).strip()
    elif tag == "search_results" and (hits := _HIT.findall(inner)):
        step.sources = [
            Source(_plain(title, 200), unescape(url).strip(), _plain(snippet, EXCERPT_CHARS))
            for title, url, snippet in hits
        ]
        _titles_seen(fold, step.sources)
    elif tag == "search_results" and "<result" not in inner:
        # "No results. Try other or fewer words."
        step.text = unescape(_TAG.sub("", inner)).strip()
    elif tag == "page":
        url = attributes.get("url") or str(data.get("url", ""))
        title = attributes.get("title") or str(data.get("title", ""))
        content = _CONTENT.search(inner)
        step.page = Source(title, url, _plain(content[1], EXCERPT_CHARS) if content else "")
        if title:
            fold.titles[url] = title
            step.subject = _subject(step.tool, step.params, fold.titles)
    elif tag == "artifact" and step.artifact is None:
        # read_artifact names what it read in its attributes; the changing tools in artifact_change.
        artifact_id = attributes.get("id") or unescape(_TAG.sub("", inner.split("</id>", 1)[0]))
        version = attributes.get("version", "")
        # Without a version asked for, a read of what the run wrote reads its working copy.
        working = artifact_id in fold.written and step.params.get("version") is None
        step.artifact = ArtifactRef(
            artifact_id, attributes.get("title", ""), int(version) if version.isdigit() else None, working=working
        )
    elif tag == "subagent_result":
        step.body = step.body or unescape(inner.rsplit("</subagent_result>", 1)[0]).strip()
    elif tag != "artifact":
        step.text = result


def step_outcome(step: Step, data: dict) -> str:
    """A finished call's result in a few words."""
    if not data.get("success"):
        return shortened(step.text.splitlines()[0] if step.text.strip() else "", OUTCOME_CHARS)
    if step.kind == AGENT:
        return gettext("reported back") if step.body else gettext("no report")
    if step.tool == WEB_SEARCH:
        count = len(step.sources)
        return (
            ngettext("%(count)s result", "%(count)s results", count) % {"count": count}
            if count
            else gettext("no results")
        )
    # An artifact step says no version: while the turn runs, what it wrote is
    # unsaved, and its count is not the number the save takes. The activity
    # names the version saved (agents.selectors.run_activity).
    return ""
