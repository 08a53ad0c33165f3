"""A project's readers lose its conversations the moment they are taken out
of it or leave a group that made them members; a scheduled turn's end is
counted by its schedule."""

from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from agents.models import Run
from artifactflow import realtime
from conversations.models import Conversation
from conversations.signals import groups_left

from .models import ProjectMember
from .schedules import schedule_run_ended

ENDED = {Run.Status.COMPLETED, Run.Status.FAILED}


@receiver(post_delete, sender=ProjectMember, dispatch_uid="projects.member_removed")
def member_removed(*, instance, **kwargs):
    """Someone taken out of a project (here, in the admin, or with their group):
    the open pages of its conversations check whether their readers still may."""
    conversations = Conversation.objects.filter(project_id=instance.project_id).values_list("pk", flat=True)
    for conversation_id in conversations:
        realtime.event_send_on_commit(conversation_id=conversation_id, type=realtime.SHARES_CHANGED)


@receiver(m2m_changed, sender=get_user_model().groups.through, dispatch_uid="projects.group_left")
def group_left(*, instance, action, reverse, pk_set, **kwargs):
    """As conversations.signals.group_left, for the projects a group is a member of."""
    group_ids = groups_left(instance=instance, action=action, reverse=reverse, pk_set=pk_set)
    if not group_ids:
        return
    projects = ProjectMember.objects.filter(group_id__in=group_ids).values("project_id")
    for conversation_id in Conversation.objects.filter(project_id__in=projects).values_list("pk", flat=True):
        realtime.event_send_on_commit(conversation_id=conversation_id, type=realtime.SHARES_CHANGED)


@receiver(post_save, sender=Run, dispatch_uid="projects.scheduled_run_ended")
def scheduled_run_ended(*, instance, update_fields, **kwargs):
    if instance.schedule_id is None or instance.status not in ENDED:
        return
    if update_fields is not None and "status" not in update_fields:
        return
    schedule_run_ended(run=instance)
