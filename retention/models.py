from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _


class RetentionPolicy(models.Model):
    """How long one kind of thing is kept (retention.services). Every kind is
    off until an administrator switches it on, having read its dry run."""

    class Kind(models.TextChoices):
        CONVERSATIONS = "conversations", _("conversations untouched for")
        UPLOADS = "uploads", _("uploaded files' originals older than")
        EVENTS = "events", _("turns' event logs of conversations idle for")
        AUDIT = "audit", _("audit records older than")
        PEOPLE = "people", _("conversations of people deactivated for")
        SNAPSHOTS = "snapshots", _("snapshots of web pages read longer ago than")

    # Each kind's days until an administrator sets others: a team might choose them.
    DEFAULT_DAYS = {
        Kind.CONVERSATIONS: 365,
        Kind.UPLOADS: 180,
        Kind.EVENTS: 90,
        Kind.AUDIT: 730,
        Kind.PEOPLE: 30,
        Kind.SNAPSHOTS: 180,
    }

    kind = models.CharField(_("what"), max_length=20, choices=Kind.choices, unique=True)
    days = models.PositiveIntegerField(_("days"), validators=[MinValueValidator(1)])
    enabled = models.BooleanField(_("switched on"), default=False)
    last_run_at = models.DateTimeField(_("last applied"), null=True, blank=True)
    # What the last run removed: {"count": n, "bytes": n}.
    last_report = models.JSONField(_("last removed"), default=dict, blank=True)

    class Meta:
        verbose_name = _("retention policy")
        verbose_name_plural = _("retention policies")
        ordering = ["pk"]

    def __str__(self):
        return f"{self.get_kind_display()} {self.days} d"
