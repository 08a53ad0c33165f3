from django.db import models
from django.db.models.functions import Length

from conversations.models import Conversation

from .validators import artifact_id_validate, content_type_validate, title_validate


class ArtifactSession(models.Model):
    """The artifacts of one conversation; it shares the conversation's id."""

    conversation = models.OneToOneField(
        Conversation, primary_key=True, on_delete=models.CASCADE, related_name="artifact_session"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return str(self.pk)


def upload_path(artifact, filename):
    return f"artifacts/{artifact.session_id}/{artifact.artifact_id}"


class Artifact(models.Model):
    class Source(models.TextChoices):
        AGENT = "agent"
        USER_UPLOAD = "user_upload"
        # What a turn stored because it was too long to show the model (a tool
        # result, a subagent's report): the cleanup's default candidates.
        RUN = "run", "Run output"

    session = models.ForeignKey(ArtifactSession, on_delete=models.CASCADE, related_name="artifacts")
    # The id agents and users name the artifact by (e.g. "task_plan"), unique per session.
    artifact_id = models.CharField(max_length=200, validators=[artifact_id_validate])
    content_type = models.CharField(max_length=100, default="text/markdown", validators=[content_type_validate])
    title = models.CharField(max_length=300, blank=True, validators=[title_validate])
    content = models.TextField(blank=True)
    # The newest version on any branch, whose text `content` is. Writers lock
    # the row; a write that overlapped another on its branch is told by the
    # branch's newest version (`artifacts.branches`), not by this one.
    current_version = models.PositiveIntegerField(default=1)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.AGENT)
    # The uploaded file as it came: what a binary artifact is, and the
    # original of an upload that was converted to text (.docx, .pdf).
    file = models.FileField(upload_to=upload_path, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["session", "artifact_id"], name="artifact_id_unique_per_session")
        ]

    def __str__(self):
        return self.artifact_id

    @property
    def is_text(self):
        return not self.file or bool(self.content)


class ArtifactVersion(models.Model):
    """One saved text of an artifact, on the branch of the message it was
    written at (see `artifacts.branches`)."""

    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    content = models.TextField(blank=True)
    # The text's length in characters, kept by the database: counting the
    # characters of a 20 MB text took longer than rendering its first page.
    length = models.GeneratedField(
        expression=Length("content"), output_field=models.PositiveIntegerField(), db_persist=True
    )
    # What the branch shows as the artifact's title; blank in versions saved
    # before titles were kept per version, which show the artifact's.
    title = models.CharField(max_length=300, blank=True, validators=[title_validate])
    # The message whose branch the version belongs to: the turn's that wrote
    # it, or the one the user was looking at when uploading or editing. None
    # (before the first message, and for versions older than branches) is on
    # every branch. A deleted message takes its branch's versions with it.
    message = models.ForeignKey(
        "conversations.Message", null=True, blank=True, on_delete=models.CASCADE, related_name="artifact_versions"
    )
    # The run that wrote it; None for the user's own uploads and edits.
    run = models.ForeignKey(
        "agents.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="artifact_versions"
    )
    update_type = models.CharField(max_length=30)
    changes = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["artifact", "version"]
        constraints = [models.UniqueConstraint(fields=["artifact", "version"], name="version_unique_per_artifact")]

    def __str__(self):
        return f"{self.artifact} v{self.version}"
