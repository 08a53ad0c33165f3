"""Retention a team sets (RetentionPolicy): per kind, what is removed once it
is older than the policy's days, planned first (retention_plan: how many and
how many bytes, the admin's dry run) and applied by django-q2's schedule
(policies_apply) only for the policies switched on. A conversation on hold
(Conversation.retention_hold) is never touched by any of them, nor its uploads
or events; one with a turn in progress waits for the next run.

- conversations: those nobody has touched (updated_at) for the days, deleted
  whole as the page's Delete does;
- uploads: the stored original of an uploaded file whose text was read; the
  text stays (an image, whose file is all there is, stays whole);
- events: the event logs of ended turns in conversations idle for the days
  (their answers stay; their activity and trace go), as
  ARTIFACTFLOW_EVENT_RETENTION_DAYS does;
- audit: audit records older than the days;
- people: the conversations of people deactivated for the days, as the audit
  trail dates the deactivation (someone deactivated before the trail began is
  left to the administrator);
- snapshots: the kept text of web pages agents read longer ago than the days
  (a citation of one then opens the live page).
"""

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Max, Sum, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from agents.selectors import conversations_busy
from agents.services.retention import events_expirable, events_expire
from artifacts.cleanup import OctetLength
from artifacts.models import Artifact, ArtifactVersion
from audit.models import AuditEvent
from audit.services import audit_prune
from conversations import lifecycle
from conversations.models import Conversation, Message
from library.models import WebSnapshot

from .models import RetentionPolicy

logger = logging.getLogger(__name__)

# A run of the schedule stops starting new removals after this long; the next run goes on.
APPLY_SECONDS = 60
Kind = RetentionPolicy.Kind


@dataclass
class RetentionPlan:
    count: int
    bytes: int


def retention_plan(*, kind: str, days: int) -> RetentionPlan:
    """What the policy would remove now, with the bytes of text and files it frees."""
    cutoff = timezone.now() - timedelta(days=days)
    if kind in (Kind.CONVERSATIONS, Kind.PEOPLE):
        conversations = _conversations(kind=kind, cutoff=cutoff)
        return RetentionPlan(count=conversations.count(), bytes=_conversation_bytes(conversations))
    if kind == Kind.UPLOADS:
        uploads = list(_uploads(cutoff=cutoff).values_list("file", flat=True))
        return RetentionPlan(count=len(uploads), bytes=sum(_file_size(name) for name in uploads))
    if kind == Kind.SNAPSHOTS:
        snapshots = _snapshots(cutoff=cutoff)
        return RetentionPlan(count=snapshots.count(), bytes=snapshots.aggregate(total=Sum("size"))["total"] or 0)
    if kind == Kind.EVENTS:
        events = events_expirable(idle_before=cutoff)
        size = events.aggregate(total=Sum(OctetLength(Cast("data", TextField()))))["total"] or 0
        return RetentionPlan(count=events.count(), bytes=size)
    records = AuditEvent.objects.filter(at__lt=cutoff)
    size = records.aggregate(
        total=Sum(OctetLength(Cast("changes", TextField())) + OctetLength(Cast("detail", TextField())))
    )["total"]
    return RetentionPlan(count=records.count(), bytes=size or 0)


def policies_apply(*, seconds: float = APPLY_SECONDS) -> dict[str, int]:
    """Applies every policy switched on, within `seconds` in all; returns how
    many things each removed. django-q2's schedule runs it (retention.apps)."""
    started = time.monotonic()
    removed = {}
    for policy in RetentionPolicy.objects.filter(enabled=True):
        left = max(seconds - (time.monotonic() - started), 0)
        cutoff = timezone.now() - timedelta(days=policy.days)
        plan = retention_plan(kind=policy.kind, days=policy.days) if left else RetentionPlan(0, 0)
        count = _apply(kind=policy.kind, cutoff=cutoff, seconds=left) if left else 0
        removed[policy.kind] = count
        report = {"count": count, "bytes": plan.bytes if count >= plan.count else None}
        RetentionPolicy.objects.filter(pk=policy.pk).update(last_run_at=timezone.now(), last_report=report)
        if count:
            logger.info("Retention (%s, %s days) removed %s", policy.kind, policy.days, count)
    return removed


def _apply(*, kind: str, cutoff, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    if kind in (Kind.CONVERSATIONS, Kind.PEOPLE):
        deleted = 0
        for conversation in _conversations(kind=kind, cutoff=cutoff).iterator():
            if time.monotonic() > deadline:
                break
            try:
                lifecycle.conversation_delete(conversation=conversation)
            except ValidationError:
                # A turn started since the plan: the next run takes it.
                continue
            deleted += 1
        return deleted
    if kind == Kind.UPLOADS:
        removed = 0
        storage = Artifact._meta.get_field("file").storage
        for pk, name in _uploads(cutoff=cutoff).values_list("pk", "file").iterator():
            if time.monotonic() > deadline:
                break
            # The row first: a file whose row still names it is never missing.
            if Artifact.objects.filter(pk=pk, file=name).update(file=""):
                storage.delete(name)
                removed += 1
        return removed
    if kind == Kind.EVENTS:
        return events_expire(idle_before=cutoff, seconds=seconds)
    if kind == Kind.SNAPSHOTS:
        return _snapshots(cutoff=cutoff).delete()[0]
    return audit_prune(before=cutoff)


def _conversations(*, kind: str, cutoff):
    conversations = Conversation.objects.filter(retention_hold=False).exclude(pk__in=conversations_busy())
    if kind == Kind.CONVERSATIONS:
        return conversations.filter(updated_at__lt=cutoff)
    return conversations.filter(owner__in=_people_gone(cutoff=cutoff))


def _snapshots(*, cutoff):
    return WebSnapshot.objects.filter(fetched_at__lt=cutoff, conversation__retention_hold=False)


def _people_gone(*, cutoff) -> list[int]:
    """Deactivated people whose deactivation (the last change of is_active the
    audit trail holds) is older than the cutoff."""
    inactive = list(get_user_model().objects.filter(is_active=False).values_list("pk", flat=True))
    changes = (
        AuditEvent.objects.filter(
            object_type=get_user_model()._meta.label_lower,
            object_id__in=[str(pk) for pk in inactive],
            action=AuditEvent.Action.CHANGE,
            changes__has_key="is_active",
        )
        .values("object_id")
        .annotate(last=Max("at"))
    )
    return [int(row["object_id"]) for row in changes if row["last"] < cutoff]


def _conversation_bytes(conversations) -> int:
    messages = Message.objects.filter(conversation__in=conversations).aggregate(
        total=Sum(OctetLength("content") + OctetLength("response"))
    )["total"]
    versions = ArtifactVersion.objects.filter(artifact__session__conversation__in=conversations).aggregate(
        total=Sum(OctetLength("content"))
    )["total"]
    snapshots = WebSnapshot.objects.filter(conversation__in=conversations).aggregate(total=Sum("size"))["total"]
    files = Artifact.objects.filter(session__conversation__in=conversations).exclude(file="")
    return (
        (messages or 0)
        + (versions or 0)
        + (snapshots or 0)
        + sum(_file_size(name) for name in files.values_list("file", flat=True))
    )


def _uploads(*, cutoff):
    """Uploads whose text was read, with their stored original, outside held conversations."""
    return (
        Artifact.objects.filter(source=Artifact.Source.USER_UPLOAD, created_at__lt=cutoff)
        .exclude(file="")
        .exclude(content="")
        .filter(session__conversation__retention_hold=False)
    )


def _file_size(name: str) -> int:
    try:
        return Artifact._meta.get_field("file").storage.size(name)
    except OSError:
        return 0
