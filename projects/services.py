"""Making, sharing and filling projects. Every function takes what its view
found through projects.access: the owner's project for its settings and
members, a project the person contributes to for what they add."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext

from artifactflow import realtime
from artifactflow.ids import id_from_text
from artifactflow.names import name_line
from conversations.lifecycle import lead_model_check
from conversations.models import Conversation
from conversations.selectors import share_groups

from .access import project_contributes
from .models import Project, ProjectMember

# The lead's prompt carries them on every call: a page of guidance, not a library.
INSTRUCTIONS_MAX_CHARS = 8_000


def _checked(*, name: str, instructions: str, lead_model: str) -> dict:
    name = name_line(name)
    if not name:
        raise ValidationError(gettext("A project needs a name."))
    max_length = Project._meta.get_field("name").max_length
    if len(name) > max_length:
        raise ValidationError(gettext("A name may have at most %(max)s characters.") % {"max": max_length})
    instructions = instructions.replace("\x00", "").strip()
    if len(instructions) > INSTRUCTIONS_MAX_CHARS:
        raise ValidationError(
            gettext("Standing instructions may have at most %(max)s characters; these have %(length)s.")
            % {"max": f"{INSTRUCTIONS_MAX_CHARS:,}", "length": f"{len(instructions):,}"}
        )
    lead_model_check(lead_model)
    return {"name": name, "instructions": instructions, "lead_model": lead_model}


def project_create(*, user, name: str, instructions: str = "", lead_model: str = "") -> Project:
    fields = _checked(name=name, instructions=instructions, lead_model=lead_model)
    return Project.objects.create(owner=user, **fields)


def project_update(*, project: Project, name: str, instructions: str, lead_model: str) -> Project:
    for field, value in _checked(name=name, instructions=instructions, lead_model=lead_model).items():
        setattr(project, field, value)
    project.save()
    return project


def project_delete(*, project: Project) -> None:
    """Delete the project: its conversations go back to their owners' lists,
    unshared. Refused while it holds library documents, which are people's uploads."""
    documents = project.documents.count()
    if documents:
        raise ValidationError(
            gettext("The project still holds %(count)s library documents: remove them first.") % {"count": documents}
        )
    with transaction.atomic():
        conversation_ids = list(project.conversations.values_list("pk", flat=True))
        project.delete()
        _access_changed(conversation_ids)


def member_add(*, project: Project, by, role: str, username: str = "", group_id="") -> ProjectMember:
    """Add a person (by username) or a group (one `by` may share with) to the
    project, or change the role of one already in it."""
    if role not in ProjectMember.Role.values:
        raise ValidationError(gettext("Choose reader or contributor."))
    audience = {}
    if str(group_id or "").strip():
        pk = id_from_text(group_id)
        group = share_groups(user=by).filter(pk=pk).first() if pk is not None else None
        if group is None:
            raise ValidationError(gettext("That group cannot be chosen here. Choose one of the groups listed."))
        audience["group"] = group
    else:
        username = username.strip()
        user = get_user_model().objects.filter(username=username, is_active=True).first() if username else None
        if user is None:
            raise ValidationError(gettext("No one here is called “%(name)s”.") % {"name": username})
        if user.pk == project.owner_id:
            raise ValidationError(gettext("It is your own project."))
        audience["user"] = user
    with transaction.atomic():
        member, created = ProjectMember.objects.get_or_create(
            project=project, **audience, defaults={"role": role, "created_by": by}
        )
        if not created and member.role != role:
            member.role = role
            member.save(update_fields=["role"])
    return member


def member_remove(*, project: Project, member_id) -> bool:
    """Take someone out of the project: their open pages of its conversations
    close at once (projects.signals). False if the project has no such member."""
    # From a form (text) or a URL's <id:…> (a number) alike.
    pk = id_from_text(str(member_id))
    return pk is not None and _member_deleted(ProjectMember.objects.filter(project=project, pk=pk))


def member_leave(*, project: Project, user) -> bool:
    """The user leaves a project they are a member of by name; their open
    pages of its conversations close (projects.signals). A membership through
    a group is left by leaving the group. False if they had none by name."""
    return _member_deleted(ProjectMember.objects.filter(project=project, user=user))


def _member_deleted(members) -> bool:
    member = members.first()
    if member is None:
        return False
    # Deleted as an instance, not by a queryset: post_delete announces it.
    member.delete()
    return True


def conversation_move(*, conversation: Conversation, user, project: Project | None) -> Conversation:
    """Move the user's own conversation into a project they contribute to, or
    out of any (None). Readers of the project it leaves lose it at once."""
    if conversation.owner_id != user.pk:
        raise ValidationError(gettext("Only its owner may move a conversation."))
    if project is not None and not project_contributes(user=user, project=project):
        raise ValidationError(gettext("You cannot add conversations to that project."))
    left = conversation.project_id is not None and conversation.project_id != (project.pk if project else None)
    conversation.project = project
    # Moving is not news: the list keeps its order (no updated_at).
    Conversation.objects.filter(pk=conversation.pk).update(project=project)
    if left:
        _access_changed([conversation.pk])
    return conversation


def _access_changed(conversation_ids) -> None:
    """The open pages of these conversations check whether their readers may
    still read them (live.consumers.ConversationConsumer.shares_changed)."""
    for conversation_id in conversation_ids:
        realtime.event_send_on_commit(conversation_id=conversation_id, type=realtime.SHARES_CHANGED)
