import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from artifactflow.realtime import conversation_group


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    # The leaf of the branch the user is looking at; new messages continue it.
    active_branch = models.ForeignKey("Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The models-file name of the model the person chose for the lead agent
    # (agents.llm.config, [lead] choices); blank: the configured default.
    lead_model = models.CharField(max_length=100, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # The project it is part of (projects.models): its readers read it, its
    # instructions reach the lead agent. Deleting a project leaves its
    # conversations to their owners.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations"
    )
    # A conversation continued from another's branch (conversations.lifecycle):
    # where it came from, kept while the original is.
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks", editable=False
    )
    forked_at = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Pinned conversations head the owner's list, apart from its date groups
    # and its paging; null: not pinned.
    pinned_at = models.DateTimeField(null=True, blank=True)
    # When the owner last looked at the conversation after one of its turns
    # ended: a turn that ended later is news the list marks. Only the owner's:
    # marks say what waits for the person whose turns they are. Null for the
    # conversations from before marks: none of their turns is news.
    seen_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    # On hold: no retention policy removes it or anything in it (retention.services).
    # A default in the database: SQLite adds the column in place rather than
    # rebuilding the table under the search views of migration 0004.
    retention_hold = models.BooleanField(
        _("on hold"),
        default=False,
        db_default=False,
        help_text=_("No retention policy removes this conversation or its uploads."),
    )

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self):
        return self.title or str(self.id)

    def get_absolute_url(self):
        return reverse("conversation-detail", args=[self.pk])

    @property
    def group_name(self) -> str:
        return conversation_group(self.pk)


class Message(models.Model):
    """One user message and the assistant's final answer to it: a node of the
    conversation tree. A message with no parent is a root."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    content = models.TextField()
    # The answer as the model wrote it (markdown): rendered once, when it is
    # stored, and kept in the cache (artifactflow.rendered), not here.
    response = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["conversation", "parent"])]

    def __str__(self):
        return self.content[:60]


class ConversationShare(models.Model):
    """Read access to a conversation for someone besides its owner: one user,
    every member of a group (the portal's teams), or everyone signed in.
    Writes stay the owner's alone (conversations.selectors)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="shares")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="conversation_shares"
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="conversation_shares"
    )
    everyone = models.BooleanField(default=False, help_text=_("Everyone signed in may read the conversation."))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-everyone", "created_at", "id"]
        constraints = [
            # Exactly one audience per row.
            models.CheckConstraint(
                condition=(
                    models.Q(everyone=True, user__isnull=True, group__isnull=True)
                    | models.Q(everyone=False, user__isnull=False, group__isnull=True)
                    | models.Q(everyone=False, user__isnull=True, group__isnull=False)
                ),
                name="share_one_audience",
            ),
            models.UniqueConstraint(
                fields=["conversation", "user"], condition=models.Q(user__isnull=False), name="share_unique_user"
            ),
            models.UniqueConstraint(
                fields=["conversation", "group"], condition=models.Q(group__isnull=False), name="share_unique_group"
            ),
            models.UniqueConstraint(
                fields=["conversation"], condition=models.Q(everyone=True), name="share_unique_everyone"
            ),
        ]

    def __str__(self):
        if self.everyone:
            return "everyone"
        return str(self.user or self.group)
