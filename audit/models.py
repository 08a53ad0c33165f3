from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AppendOnly(Exception):
    """An audit record is never changed, nor deleted but by retention (audit.services.audit_prune)."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnly("Audit records are not changed.")

    def delete(self):
        raise AppendOnly("Audit records are deleted only by their retention (audit_prune).")


class AuditEvent(models.Model):
    """Who did what, when, from where: one append-only record (audit.services)."""

    class Action(models.TextChoices):
        SIGN_IN = "sign_in", _("signed in")
        SIGN_IN_FAILED = "sign_in_failed", _("failed to sign in")
        SIGN_OUT = "sign_out", _("signed out")
        SHARE = "share", _("shared")
        SHARE_REVOKE = "share_revoke", _("revoked a share")
        FORK = "fork", _("continued another's conversation")
        EXPORT = "export", _("exported")
        APPROVE = "approve", _("allowed a tool call")
        DENY = "deny", _("denied a tool call")
        ADMIN_VIEW = "admin_view", _("opened another's in the admin")
        CREATE = "create", _("created")
        CHANGE = "change", _("changed")
        DELETE = "delete", _("deleted")

    at = models.DateTimeField(_("when"), default=timezone.now, db_index=True)
    # No constraint and nothing done on delete: a record outlives its actor and never changes when they go.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
        verbose_name=_("who"),
    )
    # The actor's name as it was, and for a failed sign-in the name that was tried; empty for the system.
    actor_name = models.CharField(_("name"), max_length=150, blank=True)
    action = models.CharField(_("action"), max_length=30, choices=Action.choices)
    # What it was done to: its model ("auth.user"), key and name as they were.
    object_type = models.CharField(_("object type"), max_length=100, blank=True)
    object_id = models.CharField(_("object id"), max_length=64, blank=True)
    object_repr = models.CharField(_("object"), max_length=200, blank=True)
    address = models.GenericIPAddressField(_("address"), null=True, blank=True)
    # A change's fields as {field: [before, after]}; a secret's values are never written.
    changes = models.JSONField(_("changes"), default=dict, blank=True)
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        verbose_name = _("audit record")
        verbose_name_plural = _("audit trail")
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["actor", "at"]), models.Index(fields=["action", "at"])]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or '—'} {self.action} {self.object_repr}".strip()

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnly("Audit records are not changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("Audit records are deleted only by their retention (audit_prune).")
