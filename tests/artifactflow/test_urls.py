"""Every URL of the portal, tried by a signed-in attacker with the owner's ids,
and by a reader the owner shares the conversation with.

The URLconf is walked (`get_resolver`), so a new pattern is covered without
editing this file. Each pattern is filled with the owner's ids, then with each
other id once, the rest kept the owner's: the owner's other objects, missing
ids, malformed ones (values the URL converter accepts but the database does
not) and the attacker's own. The owner's ids, and the attacker's own (where a
view gets as far as reading its parameters), are requested with GET and POST,
with valid, invalid and missing parameters, with and without HTMX; the other
ids with a GET and a POST of valid parameters. No response may be a 5xx, show the owner's text or
conversation ids, or change the owner's rows; a URL naming another user's
object answers exactly as one naming no object at all: 404 (or 405 for the
wrong method). A parameter name this file cannot fill fails the test rather
than being skipped.

The attacker's world has shares too: the conversation is shared with another
user and with a group the attacker is not in, and was shared with the
attacker by name (revoked) and through a group the attacker has left. None of
them lets the attacker in. A reader it is shared with gets every page that
reads it (200) and nothing that changes it: every POST is a 404 that changes
nothing, and no page they are shown offers a form that would.
"""

import datetime
import itertools
import re
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote

import lxml.html
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.db.models import Q
from django.test import Client
from django.urls import URLResolver, get_resolver, resolve, reverse
from django.urls.exceptions import Resolver404
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.defaults import server_error

from agents.models import Run, RunEvent
from agents.services.execution import run_execute
from agents.state import pending_request
from artifactflow import health
from artifacts import services as artifact_services
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from conversations import lifecycle
from conversations.models import Conversation, ConversationShare, Message
from conversations.selectors import readable_filter
from library.models import LibraryDocument, WebSnapshot
from library.services import library_document_create, snapshot_keep
from projects import services as project_services
from projects.models import Project, ProjectMember, Schedule
from projects.schedules import schedule_set
from tests.agents.test_engine import call
from tests.factories import ConversationShareFactory, MessageFactory, RunFactory, UserFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db

# In every text of the owner's: no response to the attacker may contain it.
MARKER = "zq7-owner-secret"
# Part of the owner's title, which the attacker searches for.
SEARCHED = "heat pumps"


@dataclass(frozen=True)
class Value:
    text: str
    # The id names no object of the attacker's: owner's, missing or malformed.
    foreign: bool = True


@dataclass
class World:
    owner: object
    attacker: object
    conversation: Conversation
    own_conversation: Conversation
    pending_id: str
    message_id: int
    base_version: int
    values: dict[str, list[Value]]
    snapshot: list = field(default_factory=list)
    owner_queries: list = field(default_factory=list)
    # The attacker's session cookie: signed in once, every request rolls back.
    cookie: str = ""

    @property
    def secrets(self) -> list[str]:
        return [MARKER, str(self.conversation.pk)]


def _owner_queries(owner) -> list[tuple[str, tuple]]:
    """The SQL that reads everything of the owner's, and anything that points at
    it: compiled once, as the walks read it after each of some thousand requests."""
    mine = Q(conversation__owner=owner)
    querysets = [
        Conversation.objects.filter(owner=owner),
        Message.objects.filter(mine | Q(parent__conversation__owner=owner)),
        Run.objects.filter(message__conversation__owner=owner),
        RunEvent.objects.filter(run__message__conversation__owner=owner),
        ArtifactSession.objects.filter(mine),
        ConversationShare.objects.filter(mine),
        Artifact.objects.filter(session__conversation__owner=owner),
        ArtifactVersion.objects.filter(artifact__session__conversation__owner=owner),
        get_user_model().objects.filter(pk=owner.pk),
        LibraryDocument.objects.filter(uploaded_by=owner),
        WebSnapshot.objects.filter(mine),
        Project.objects.filter(owner=owner),
        ProjectMember.objects.filter(project__owner=owner),
        Schedule.objects.filter(mine),
    ]
    return [qs.order_by("pk").values_list().query.sql_with_params() for qs in querysets]


def _owner_rows(world: World) -> list:
    """Everything of the owner's, and anything that points at it, row by row."""
    with connection.cursor() as cursor:
        rows = []
        for sql, params in world.owner_queries:
            cursor.execute(sql, params)
            rows.append(cursor.fetchall())
    return rows


@pytest.fixture
def world(user, other_user, scripted_model, settings):
    owner, attacker = user, other_user
    question = f"How do {SEARCHED} work in winter? {MARKER}"
    scripted_model.add(Text(f"An answer only the owner may read: {MARKER}. " * 20))
    conversation = lifecycle.conversation_start(user=owner, content=question, enqueue=False)
    completed = run_execute(run_id=conversation.active_branch.runs.get().pk)

    # A worker swept lately, as on a running portal: /readyz answers 200, not its 503.
    health.worker_seen()

    settings.TOOL_PERMISSIONS = {"create_artifact": "confirm"}
    scripted_model.add(Text(call("create_artifact", id="draft", content=f"Pending parameters {MARKER}")))
    waiting_message = lifecycle.message_post(conversation=conversation, content=f"Draft it {MARKER}", enqueue=False)
    waiting = run_execute(run_id=waiting_message.runs.get().pk)
    waiting.refresh_from_db()
    assert waiting.status == Run.Status.WAITING_PERMISSION

    failed = RunFactory(
        message=MessageFactory(conversation=conversation, parent=waiting_message, content=f"Fail {MARKER}"),
        status=Run.Status.FAILED,
        error=f"The owner's failure {MARKER}",
    )
    running = RunFactory(
        message=MessageFactory(conversation=conversation, parent=None, content=f"Branch {MARKER}"),
        status=Run.Status.RUNNING,
    )

    branch = branch_shown(conversation=conversation)
    manager = ArtifactManager(branch=branch)
    manager.create(artifact_id="report", content=f"# Report\n\n{MARKER} first", title=f"Report {MARKER}")
    manager.create(artifact_id="task_plan", content=f"- [x] {MARKER}\n- [ ] write")
    manager.flush_all()
    manager = ArtifactManager(branch=branch)
    manager.rewrite(artifact_id="report", content=f"# Report\n\n{MARKER} second")
    manager.flush_all()
    artifact_services.artifact_upload(branch=branch, filename="chart.png", data=MARKER.encode() + b"\x89PNG")
    artifact_services.artifact_upload(branch=branch, filename="报告.md", data=f"# 报告 {MARKER}".encode())

    # Shared, but never with the attacker: with someone else, with a group
    # the attacker is not in, by name and revoked, through a group the attacker left.
    ConversationShareFactory(conversation=conversation, user=UserFactory())
    ConversationShareFactory(conversation=conversation, group=Group.objects.create(name="Not the attacker's"))
    ConversationShareFactory(conversation=conversation, user=attacker).delete()
    left = Group.objects.create(name="Left by the attacker")
    attacker.groups.add(left)
    ConversationShareFactory(conversation=conversation, group=left)
    attacker.groups.remove(left)

    own_conversation = lifecycle.conversation_start(user=attacker, content="My own question", enqueue=False)
    # The owner's project holds the conversation, a document and a schedule: shared with someone
    # else, and with the attacker until revoked. The attacker has a project of their own.
    project = project_services.project_create(user=owner, name=f"Project {MARKER}", instructions=MARKER)
    project_services.conversation_move(conversation=conversation, user=owner, project=project)
    project_services.member_add(project=project, by=owner, role="contributor", username=UserFactory().username)
    revoked = project_services.member_add(project=project, by=owner, role="reader", username=attacker.username)
    project_services.member_remove(project=project, member_id=revoked.pk)
    project_document = library_document_create(
        user=owner, title=f"Project notes {MARKER}", content=f"Only the project's: {MARKER}", project=project
    )
    schedule_set(
        conversation=conversation, question=MARKER, frequency="daily", at=datetime.time(8), time_zone="Asia/Shanghai"
    )
    own_project = project_services.project_create(user=attacker, name="The attacker's project")
    # The owner's team's document, which the attacker (in no team) may not see, and
    # one the owner added for everyone, which the attacker may read but not remove.
    team = Group.objects.create(name="Owner's team")
    owner.groups.add(team)
    limited = library_document_create(
        user=owner, title=f"Heat pumps {MARKER}", content=f"How heat pumps work: {MARKER}", group=team
    )
    shared = library_document_create(user=owner, title="Heat pumps for everyone", content="Heat pumps move heat.")
    snapshot = snapshot_keep(
        conversation_id=conversation.pk,
        url="https://heat.example/pumps",
        title=f"Heat pumps {MARKER}",
        content_type="text/html",
        text=f"What the owner's agent read: {MARKER}",
    )
    run_ids = [completed.pk, waiting.pk, failed.pk, running.pk]
    missing_run = Run.objects.order_by("-pk").values_list("pk", flat=True).first() + 1000
    assert Conversation.objects.filter(readable_filter(user=attacker), pk=conversation.pk).count() == 0
    report = Artifact.objects.get(session=branch.session, artifact_id="report")
    result = World(
        owner=owner,
        attacker=attacker,
        conversation=conversation,
        own_conversation=own_conversation,
        pending_id=pending_request(waiting.checkpoint).id,
        message_id=waiting_message.pk,
        base_version=report.current_version,
        values={
            "conversation_id": [
                Value(str(conversation.pk)),
                Value(str(uuid.uuid4())),
                Value(str(own_conversation.pk), foreign=False),
            ],
            "run_id": [Value(str(pk)) for pk in run_ids] + [Value(str(missing_run)), Value("9" * 25)],
            "document_id": [
                Value(str(limited.pk)),
                Value(str(project_document.pk)),
                Value(str(shared.pk), foreign=False),
                Value(str(shared.pk + 1000)),
                Value("9" * 25),
            ],
            "snapshot_id": [Value(str(snapshot.pk)), Value(str(snapshot.pk + 1000)), Value("9" * 25)],
            "project_id": [
                Value(str(project.pk)),
                Value(str(own_project.pk + 1000)),
                Value("9" * 25),
                Value(str(own_project.pk), foreign=False),
            ],
            # What follows an old admin URL the portal redirects (artifactflow.urls).
            "rest": [Value(""), Value(f"{limited.pk}/change/")],
            # A set-password link (accounts.onboarding) is its own key: the owner's id with a
            # token the attacker forged opens only the page saying the link is not valid.
            "uidb64": [
                Value(urlsafe_base64_encode(force_bytes(owner.pk)), foreign=False),
                Value("OTk5OTk5", foreign=False),
            ],
            "token": [
                Value("cz7dkq-0123456789abcdef0123456789abcdef", foreign=False),
                Value("set-password", foreign=False),
            ],
            # Artifact ids are scoped by the conversation in the same URL.
            "artifact_id": [
                Value(name, foreign=False) for name in ("report", "chart.png", "报告.md", "missing", "nul\x00id")
            ],
        },
    )
    result.owner_queries = _owner_queries(owner)
    result.snapshot = _owner_rows(result)
    client = Client()
    client.force_login(attacker)
    result.cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return result


def _parameters(world: World, variant: str, method: str) -> dict:
    if variant == "missing":
        return {}
    if variant == "valid":
        data = {
            "request_id": world.pending_id,
            "decision": "approve",
            "message": str(world.message_id),
            "parent": str(world.message_id),
            "content": "The attacker's text",
            "title": "The attacker's title",
            "base_version": str(world.base_version),
            "version": "1",
            "from": "1",
            "to": "2",
            "q": SEARCHED,
            "current": str(world.conversation.pk),
            "original": "1",
            "before": str(world.message_id),
            "audience": "everyone",
            "on": "1",
            "username": world.attacker.username,
            "group": str(Group.objects.order_by("pk").values_list("pk", flat=True).first()),
            "share": str(ConversationShare.objects.filter(conversation=world.conversation).first().pk),
            "project": str(world.conversation.project_id),
            "member": str(ProjectMember.objects.filter(project_id=world.conversation.project_id).first().pk),
            "role": "contributor",
            "name": "The attacker's project name",
            "instructions": "The attacker's instructions",
            "action": "delete",
            "question": "The attacker's question",
            "frequency": "daily",
            "at": "08:00",
            "time_zone": "UTC",
        }
        if method == "post":
            data["file"] = SimpleUploadedFile("upload", b"The attacker's upload")
        return data
    return {
        "request_id": "\x00",
        "decision": "bogus",
        "message": "²",
        "parent": "9" * 25,
        "content": "nul\x00",
        "title": "\x00",
        "base_version": "²",
        "version": "9" * 25,
        "from": "-1",
        "to": "²",
        "q": "\x00",
        "current": "not-a-uuid",
        "original": "\x00",
        "before": "²",
        "audience": "\x00",
        "on": "²",
        "username": "nul\x00",
        "group": "9" * 25,
        "share": "²",
        "start": "²",
        "project": "²",
        "member": "\x00",
        "role": "\x00",
        "name": "\x00",
        "action": "²",
        "frequency": "\x00",
        "at": "25:99",
        "time_zone": "Mars/Olympus",
    }


@dataclass(frozen=True)
class Route:
    # The pattern's text from the root, e.g. "c/<uuid:conversation_id>/rename/".
    pattern: str
    params: tuple[str, ...]
    callback: object

    @property
    def is_admin(self) -> bool:
        return self.pattern.startswith("admin/")


def _routes(resolver=None, prefix="", params=()) -> list[Route]:
    resolver = resolver or get_resolver()
    found = []
    for entry in resolver.url_patterns:
        pattern = entry.pattern
        names = tuple(getattr(pattern, "converters", None) or pattern.regex.groupindex)
        text = prefix + str(pattern).lstrip("^").rstrip("$")
        if isinstance(entry, URLResolver):
            found += _routes(entry, text, params + names)
        else:
            found.append(Route(pattern=text, params=params + names, callback=entry.callback))
    return found


# "<uuid:conversation_id>" in a route, "(?P<app_label>a|b)" in a regex.
_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def _fillings(route: Route, values: dict[str, list[Value]]) -> list[tuple[dict[str, Value], bool]]:
    """(values, first) for the route's parameters: each parameter's first value
    (the owner's), then each other value of each parameter once, the rest at their first."""
    first = {name: values[name][0] for name in route.params}
    others = [{**first, name: value} for name in route.params for value in values[name][1:]]
    return [(first, True)] + [(chosen, False) for chosen in others]


def _urls(route: Route, values: dict[str, list[Value]]):
    """(path, first, foreign) for each filling of the route that resolves to its view."""
    for chosen, first in _fillings(route, values):
        path = "/" + _PARAMETER.sub(lambda m, chosen=chosen: quote(chosen[m[1] or m[2]].text, safe=""), route.pattern)
        try:
            if resolve(path).func is not route.callback:
                continue
        except Resolver404:
            # The URL converter refuses this value; the request never reaches a view.
            continue
        yield path, first, any(value.foreign for value in chosen.values())


def _admin_values(world: World, route: Route) -> dict[str, list[Value]]:
    """Admin URLs name an object of the model their ModelAdmin serves."""
    model = getattr(getattr(route.callback, "model_admin", None), "model", None)
    owner_pk = {
        Conversation: world.conversation.pk,
        ArtifactSession: world.conversation.pk,
        ConversationShare: ConversationShare.objects.filter(conversation=world.conversation).first().pk,
        Message: world.message_id,
        Run: Run.objects.filter(message__conversation=world.conversation).first().pk,
        Artifact: Artifact.objects.filter(session__conversation=world.conversation).first().pk,
        ArtifactVersion: ArtifactVersion.objects.filter(artifact__session__conversation=world.conversation).first().pk,
        RunEvent: RunEvent.objects.filter(run__message__conversation=world.conversation).first().pk,
        get_user_model(): world.owner.pk,
    }.get(model, 1)
    return {
        "object_id": [Value(str(owner_pk))],
        "app_label": [Value("conversations")],
        "content_type_id": [Value(str(ContentType.objects.get_for_model(Conversation).pk))],
        "url": [Value(f"conversations/conversation/{world.conversation.pk}/change/")],
        "id": [Value(str(world.owner.pk))],
    }


def _body(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode(errors="replace")


# Each parameter variant once, HTMX and not among them.
VARIANTS = [("valid", True), ("invalid", False), ("valid", False), ("missing", True)]
# For a URL that names an object no view finds (missing or malformed ids, or the
# owner's beyond the first) and for the admin's: one way of each method, with the
# parameters that would act.
ONCE = [("get", VARIANTS[0]), ("post", VARIANTS[0])]


class _Undo(Exception):
    """Rolls back what one request did, so the next starts from the same rows."""


def _probe(world: World, *, method: str, path: str, variant: str, htmx: bool, foreign: bool, admin: bool) -> list[str]:
    data = _parameters(world, variant, method)
    label = f"{method.upper()} {path!r} {variant}{' htmx' if htmx else ''}"
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = world.cookie
    problems = []
    try:
        with transaction.atomic():
            try:
                response = getattr(client, method)(path, data, **headers)
            except Exception as exc:  # the test client re-raises what the view raised: a 500
                problems.append(f"{label}: raised {exc!r}")
                raise _Undo from None
            text = _body(response) + "".join(f"{k}: {v}\n" for k, v in response.items())
            asked = path + repr(data)
            for secret in world.secrets:
                if secret in text and quote(secret, safe="") not in asked and secret not in asked:
                    problems.append(f"{label}: {response.status_code} shows {secret!r}")
            if response.status_code >= 500:
                problems.append(f"{label}: {response.status_code}")
            if admin:
                # Every admin view sends a user who is not staff to the admin's login (or index).
                away = response.status_code == 302 and response["Location"].split("?")[0] in (
                    "/admin/login/",
                    "/admin/",
                )
                if not (away or 'id="login-form"' in text):
                    problems.append(f"{label}: a non-staff user got {response.status_code} from the admin")
            elif foreign and response.status_code not in (404, 405):
                problems.append(f"{label}: {response.status_code}, not 404")
            if _owner_rows(world) != world.snapshot:
                problems.append(f"{label}: changed the owner's rows")
            raise _Undo
    except _Undo:
        pass
    return problems


def _walk(world: World, routes: list[Route], *, admin: bool) -> list[str]:
    problems = []
    for route in routes:
        values = {**world.values, **(_admin_values(world, route) if admin else {})}
        unknown = [name for name in route.params if name not in values]
        if unknown:
            problems.append(f"{route.pattern}: no values for {unknown}; add them to the world fixture")
            continue
        for path, first, foreign in _urls(route, values):
            # The admin turns a user who is not staff away before any view reads a parameter.
            full = (first or not foreign) and not admin
            requests = itertools.product(("get", "post"), VARIANTS) if full else ONCE
            for method, (variant, htmx) in requests:
                problems += _probe(
                    world, method=method, path=path, variant=variant, htmx=htmx, foreign=foreign, admin=admin
                )
    return problems


def _report(problems: list[str]) -> str:
    return f"{len(problems)} problems:\n" + "\n".join(problems[:60])


def test_no_portal_url_gives_another_user_anything(world):
    routes = [route for route in _routes() if not route.is_admin]
    assert len(routes) > 10
    problems = _walk(world, routes, admin=False)
    assert not problems, _report(problems)


def test_no_admin_url_opens_for_a_user_who_is_not_staff(world):
    routes = [route for route in _routes() if route.is_admin]
    assert len(routes) > 50
    problems = _walk(world, routes, admin=True)
    assert not problems, _report(problems)


def test_favicon_ico_leads_anyone_to_the_svg_icon_that_pages_link(client):
    # Signed out, as a browser asks on the sign-in page.
    page = client.get(reverse("login"))
    response = client.get("/favicon.ico")
    icon = client.get(response["Location"])

    assert response.status_code == 302 and 'rel="icon" href="' + response["Location"] + '"' in page.content.decode()
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert _body(icon).startswith("<svg")


def test_the_server_error_page_renders_without_a_request_or_the_database(rf, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = server_error(rf.get("/"))

    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode() and 'href="/"' in response.content.decode()


# GETs that open the owner's form to change something: a reader it is shared
# with is refused them (404) as every write.
OWNER_FORMS = {"artifact-edit", "artifact-delete", "schedule-edit"}
# The writes a reader may make, which leave the owner's rows as they were:
# continuing the thread in a conversation of their own, and leaving a project
# (a reader through a group has no membership of their own to leave).
READER_WRITES = {"conversation-fork", "project-leave"}
# The URLs with the owner's ids in them: the conversation's, and its runs'.
SHARED_PARAMS = {"conversation_id", "run_id"}


def _write_urls(html: str) -> list[str]:
    """Where the page's forms and buttons would POST to."""
    if not html.strip():
        return []
    root = lxml.html.fragment_fromstring(html, create_parent="div")
    posts = root.xpath("//form[translate(@method, 'POST', 'post')='post']/@action | //@hx-post | //@formaction")
    return [str(url) for url in posts]


def _viewer_probe(world: World, *, method: str, path: str, htmx: bool) -> list[str]:
    label = f"{method.upper()} {path!r}{' htmx' if htmx else ''}"
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = world.cookie
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    problems = []
    try:
        with transaction.atomic():
            # Not `original`: the report has no uploaded original to download.
            data = {k: v for k, v in _parameters(world, "valid", method).items() if k != "original"}
            response = getattr(client, method)(path, data, **headers)
            status = response.status_code
            if method == "post" and resolve(path).url_name in READER_WRITES:
                if status not in (302, 422) and not (htmx and status == 200):
                    problems.append(f"{label}: {status}, not a fork of the reader's own")
            elif method == "post" and status not in (404, 405):
                problems.append(f"{label}: {status}, not 404")
            elif method == "get" and resolve(path).url_name in OWNER_FORMS:
                if status != 404:
                    problems.append(f"{label}: {status} opened the owner's form")
            elif method == "get" and status == 405:
                if "GET" in response["Allow"]:
                    problems.append(f"{label}: 405 though it reads")
            elif method == "get" and status not in ((200,) if htmx else (200, 302)):
                problems.append(f"{label}: {status}, not 200")
            elif method == "get" and status == 200 and response["Content-Type"].startswith("text/html"):
                # Forms that change the conversation or its runs: none to offer.
                writes = [
                    url
                    for url in _write_urls(_body(response))
                    if (str(world.conversation.pk) in url or url.startswith("/runs/"))
                    and resolve(url).url_name not in READER_WRITES
                ]
                if writes:
                    problems.append(f"{label}: offers {writes}")
            if _owner_rows(world) != world.snapshot:
                problems.append(f"{label}: changed the owner's rows")
            raise _Undo
    except _Undo:
        pass
    return problems


@pytest.mark.parametrize("through", ["share", "project"])
def test_a_reader_it_is_shared_with_reads_every_page_of_it_and_changes_nothing(world, through):
    team = Group.objects.create(name="读者组")
    world.attacker.groups.add(team)
    if through == "share":
        ConversationShareFactory(conversation=world.conversation, group=team)
    else:
        # A reader of the project it is in, through a group: the project's pages too.
        ProjectMember.objects.create(project=world.conversation.project, group=team, role=ProjectMember.Role.READER)
    world.snapshot = _owner_rows(world)
    shared_params = SHARED_PARAMS | ({"project_id"} if through == "project" else set())
    values = {
        "project_id": [Value(str(world.conversation.project_id))],
        "conversation_id": [Value(str(world.conversation.pk))],
        "run_id": [
            Value(str(pk))
            for pk in Run.objects.filter(message__conversation=world.conversation).values_list("pk", flat=True)
        ],
        # Saved in two versions, text: each of its views has something to show.
        "artifact_id": [Value("report")],
    }
    routes = [route for route in _routes() if not route.is_admin and shared_params & set(route.params)]
    assert len(routes) > 10
    problems = []
    for route in routes:
        for path, _, _ in _urls(route, values):
            for method, htmx in itertools.product(("get", "post"), (True, False)):
                problems += _viewer_probe(world, method=method, path=path, htmx=htmx)
    assert not problems, _report(problems)
