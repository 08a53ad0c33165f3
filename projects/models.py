"""A team's lines of work: projects that hold conversations, library documents
and standing instructions, shared as a conversation is; and the schedules that
ask a conversation's question again."""

import zoneinfo

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _


class Project(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(_("name"), max_length=200)
    # Added to the lead agent's prompt in every conversation of the project (agents.context).
    instructions = models.TextField(_("standing instructions"), blank=True)
    # The models-file name of the lead's model a conversation started here takes; blank: the portal's default.
    lead_model = models.CharField(_("default model"), max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("project-detail", args=[self.pk])


class ProjectMember(models.Model):
    """Someone besides the owner in a project: a person or every member of a
    group, as a reader (every conversation in it, live) or a contributor (who
    also starts conversations in it and adds library documents)."""

    class Role(models.TextChoices):
        READER = "reader", _("reader")
        CONTRIBUTOR = "contributor", _("contributor")

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="project_memberships"
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="project_memberships"
    )
    role = models.CharField(_("role"), max_length=12, choices=Role.choices, default=Role.READER)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(user__isnull=False, group__isnull=True) | models.Q(user__isnull=True, group__isnull=False)
                ),
                name="project_member_one_audience",
            ),
            models.UniqueConstraint(
                fields=["project", "user"], condition=models.Q(user__isnull=False), name="project_member_unique_user"
            ),
            models.UniqueConstraint(
                fields=["project", "group"],
                condition=models.Q(group__isnull=False),
                name="project_member_unique_group",
            ),
        ]

    def __str__(self):
        try:
            who = self.user or self.group
        except ObjectDoesNotExist:
            # Named as its person or group is deleted, which takes it with them (the audit's record).
            who = f"user {self.user_id}" if self.user_id else f"group {self.group_id}"
        return f"{who} ({self.role})"


class Schedule(models.Model):
    """A conversation's question asked again at a time of day in its owner's
    time zone: daily, on chosen weekdays, or on a day of the month. Each run
    is a new turn, started by a worker as the owner (projects.schedules)."""

    class Frequency(models.TextChoices):
        DAILY = "daily", _("Daily")
        WEEKLY = "weekly", _("Weekly")
        MONTHLY = "monthly", _("Monthly")

    conversation = models.OneToOneField("conversations.Conversation", on_delete=models.CASCADE, related_name="schedule")
    question = models.TextField(_("question"))
    frequency = models.CharField(_("repeats"), max_length=8, choices=Frequency.choices, default=Frequency.WEEKLY)
    # Monday 0 … Sunday 6, for a weekly schedule.
    weekdays = models.JSONField(_("weekdays"), default=list, blank=True)
    # For a monthly schedule; a month shorter than it runs on its last day.
    day_of_month = models.PositiveSmallIntegerField(_("day of the month"), default=1)
    time = models.TimeField(_("time"))
    time_zone = models.CharField(_("time zone"), max_length=64)
    # Tools set to confirm that its unattended turns may run without asking.
    allowed_tools = models.JSONField(_("tools allowed unattended"), default=list, blank=True)
    # When it runs next; null while paused.
    next_run_at = models.DateTimeField(_("next run"), null=True, blank=True, db_index=True)
    last_run_at = models.DateTimeField(_("last run"), null=True, blank=True)
    # Failed runs in a row: each waits longer before the next, the third pauses it.
    failures = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(_("last error"), blank=True)
    paused_at = models.DateTimeField(_("paused"), null=True, blank=True)
    pause_reason = models.TextField(_("why it is paused"), blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["next_run_at", "id"]

    def __str__(self):
        return f"{self.conversation}: {self.get_frequency_display()} {self.time:%H:%M} {self.time_zone}"

    def clean(self):
        # What the admin's form checks; the portal's own goes through projects.schedules.schedule_set.
        try:
            zoneinfo.ZoneInfo(self.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValidationError({"time_zone": _("Not a time zone.")}) from None
        if self.frequency == self.Frequency.WEEKLY and not self.weekdays:
            raise ValidationError({"weekdays": _("Choose at least one day of the week.")})
