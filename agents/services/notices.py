"""Telling people besides its owner that a turn ended (agents.models.RunNotice),
and their looking at it: each of their pages hears of either, as the owner's
pages hear of the owner's turns (live.consumers.RunStateMixin)."""

from django.db import transaction
from django.utils import timezone

from artifactflow import realtime

from ..models import Run, RunNotice


def notices_send(*, run: Run, user_ids) -> int:
    """Tell these users (never the owner) that the run ended; how many were told."""
    owner_id = run.message.conversation.owner_id
    users = sorted(set(user_ids) - {owner_id})
    with transaction.atomic():
        RunNotice.objects.bulk_create([RunNotice(run=run, user_id=user_id) for user_id in users], ignore_conflicts=True)
        for user_id in users:
            realtime.group_send_on_commit(
                group=realtime.user_group(user_id),
                type=realtime.RUN_STATE,
                conversation_id=str(run.message.conversation_id),
            )
    return len(users)


def notices_seen(*, user, conversation_id) -> None:
    """The user looked at the conversation: what they were told of it is news no more, on all their pages."""
    seen = RunNotice.objects.filter(
        user=user, seen_at__isnull=True, run__message__conversation_id=conversation_id
    ).update(seen_at=timezone.now())
    if seen:
        realtime.group_send_on_commit(
            group=realtime.user_group(user.pk), type=realtime.RUN_STATE, conversation_id=str(conversation_id)
        )
