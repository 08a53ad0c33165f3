"""Who may do what in a project: the one rule, as queries. It sits below
every app that refers to a conversation (conversations.selectors reads it to
say who may read a conversation), so it imports only its own models.

The owner does everything. A member is a person, or everyone in a group, as a
reader (reads every conversation and document in it) or a contributor (also
starts or moves their own conversations into it and adds library documents).
Writes to a conversation stay its owner's alone, wherever it is."""

from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, Q

from .models import Project, ProjectMember


def member_audience(*, user) -> Q:
    """The memberships that name a signed-in user: theirs, or a group's they are in."""
    return Q(user=user) | Q(group__user=user)


def project_readable(*, user, via: str = "") -> Q:
    """The projects `user` may read; `via` is the path from the filtered model
    to its project, e.g. "project__" from a conversation."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    members = ProjectMember.objects.filter(project=OuterRef(f"{via}pk" if via else "pk")).filter(
        member_audience(user=user)
    )
    return Q(**{f"{via}owner": user}) | Q(Exists(members))


def project_contributable(*, user) -> Q:
    """The projects `user` may add conversations and documents to."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    members = ProjectMember.objects.filter(project=OuterRef("pk"), role=ProjectMember.Role.CONTRIBUTOR).filter(
        member_audience(user=user)
    )
    return Q(owner=user) | Q(Exists(members))


def project_viewable(*, user, project_id) -> Project | None:
    """The project with this id if `user` may read it, with its owner; else None (a malformed id too)."""
    try:
        return Project.objects.select_related("owner").filter(project_readable(user=user)).get(pk=project_id)
    except (Project.DoesNotExist, ValidationError, ValueError, TypeError):
        return None


def project_owned(*, user, project_id) -> Project | None:
    """The user's own project with this id, or None: its settings and members are the owner's alone."""
    try:
        return Project.objects.filter(owner=user).get(pk=project_id)
    except (Project.DoesNotExist, ValidationError, ValueError, TypeError):
        return None


def project_contributed(*, user, project_id) -> Project | None:
    """The project with this id if `user` may add conversations and documents to it, else None."""
    try:
        return Project.objects.select_related("owner").filter(project_contributable(user=user)).get(pk=project_id)
    except (Project.DoesNotExist, ValidationError, ValueError, TypeError):
        return None


def project_contributes(*, user, project: Project) -> bool:
    """Whether `user` may add conversations and documents to the project."""
    return Project.objects.filter(pk=project.pk).filter(project_contributable(user=user)).exists()
