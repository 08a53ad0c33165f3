"""What a project's pages show: the projects someone may read, a project's
conversations, its reports at their latest versions, its schedules. Every
query is scoped to what the requesting user may read (projects.access)."""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import F, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from artifacts.models import Artifact
from artifacts.selectors import TASK_PLAN
from conversations.models import Conversation

from .access import member_audience, project_contributable, project_readable
from .models import Project, ProjectMember, Schedule

# The sidebar shows a project's latest few conversations; its page shows them all.
SIDEBAR_CONVERSATIONS = 5
PAGE_CONVERSATIONS = 200
REPORTS_LIMIT = 100


@dataclass(frozen=True)
class ProjectRole:
    owner: bool
    contributor: bool

    @property
    def reader_only(self) -> bool:
        return not self.owner and not self.contributor


def projects_for(*, user) -> list[Project]:
    """The projects the user may read, by name."""
    return list(Project.objects.filter(project_readable(user=user)).select_related("owner").order_by("name", "pk"))


def projects_contributable(*, user) -> QuerySet[Project]:
    """The projects the user may start or move conversations into."""
    return Project.objects.filter(project_contributable(user=user)).order_by("name", "pk")


def project_role(*, user, project: Project) -> ProjectRole:
    if project.owner_id == user.pk:
        return ProjectRole(owner=True, contributor=True)
    contributor = (
        ProjectMember.objects.filter(project=project, role=ProjectMember.Role.CONTRIBUTOR)
        .filter(member_audience(user=user))
        .exists()
    )
    return ProjectRole(owner=False, contributor=contributor)


def project_member_ids(*, project_id: int) -> set[int]:
    """The users who may read the project besides its owner: its members by
    name and everyone in its member groups, active ones only."""
    members = ProjectMember.objects.filter(project_id=project_id)
    users = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(
            Q(pk__in=members.filter(user__isnull=False).values("user_id"))
            | Q(groups__in=members.filter(group__isnull=False).values("group_id"))
        )
    )
    return set(users.values_list("pk", flat=True))


def project_members(*, project: Project) -> list[ProjectMember]:
    return list(ProjectMember.objects.filter(project=project).select_related("user", "group"))


def projects_sidebar(*, user, projects: list[Project]) -> list[Project]:
    """The projects with their latest SIDEBAR_CONVERSATIONS conversations each
    (`recent`) and how many they hold (`total`), in one query for them all."""
    ranked = (
        Conversation.objects.filter(project__in=projects)
        .annotate(rank=Window(RowNumber(), partition_by=[F("project_id")], order_by=[F("updated_at").desc(), F("pk")]))
        .only("id", "title", "updated_at", "project_id", "owner_id", "forked_from_id", "pinned_at")
    )
    recent: dict[int, list[Conversation]] = {project.pk: [] for project in projects}
    for conversation in ranked.filter(rank__lte=SIDEBAR_CONVERSATIONS).order_by("project_id", "rank"):
        recent[conversation.project_id].append(conversation)
    for project in projects:
        project.recent = recent[project.pk]
    return projects


def project_conversations(*, project: Project, query: str = "") -> list[Conversation]:
    """The project's conversations, newest first (those whose title has the query's words, with one)."""
    conversations = Conversation.objects.filter(project=project).select_related("owner")
    for word in query.split():
        conversations = conversations.filter(title__icontains=word)
    return list(conversations.order_by("-updated_at", "-pk")[:PAGE_CONVERSATIONS])


def project_reports(*, project: Project, query: str = "") -> list[Artifact]:
    """The text artifacts (reports, scripts) of the project's conversations as
    last saved, newest first; with a query, those whose title or text hold
    every one of its words."""
    reports = (
        Artifact.objects.filter(session__conversation__project=project)
        .exclude(artifact_id=TASK_PLAN)
        .exclude(file__gt="")
        .select_related("session__conversation")
    )
    for word in query.split():
        reports = reports.filter(Q(title__icontains=word) | Q(content__icontains=word))
    return list(reports.order_by("-updated_at", "-pk")[:REPORTS_LIMIT])


def schedule_of(*, conversation: Conversation) -> Schedule | None:
    return Schedule.objects.filter(conversation=conversation).first()


def project_schedules(*, project: Project) -> list[Schedule]:
    return list(Schedule.objects.filter(conversation__project=project).select_related("conversation__owner"))


def schedules_of(*, user) -> list[Schedule]:
    """The user's schedules, for their Settings: the next to run first, paused ones last."""
    return list(
        Schedule.objects.filter(conversation__owner=user)
        .select_related("conversation")
        .order_by(F("next_run_at").asc(nulls_last=True), "pk")
    )
