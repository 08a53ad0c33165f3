from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class UserPreference(models.Model):
    """What a user chose for themselves, kept across sessions and browsers."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    # One of settings.LANGUAGES, or empty: follow the browser's Accept-Language.
    language = models.CharField(max_length=16, blank=True)

    class Theme(models.TextChoices):
        # The browser's prefers-color-scheme decides.
        SYSTEM = "system", _("System")
        LIGHT = "light", _("Light")
        DARK = "dark", _("Dark")

    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)

    def __str__(self):
        return f"{self.user}: {self.language or 'browser'}"


class ProviderIdentity(models.Model):
    """The single sign-on account (issuer and subject, which never change) a
    user signs in with. Users are found by it, never by a username or an
    e-mail the provider lets people edit."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="provider_identity_unique")]
        verbose_name_plural = "provider identities"

    def __str__(self):
        return f"{self.user} ← {self.issuer} {self.subject}"


class ProviderGroup(models.Model):
    """A group the provider's groups claim fills: a sign-in whose claim names
    `claim` puts the user in it, and takes them out when it stops naming it
    (ProviderMembership). An admin maps a claim value to a group of theirs; a
    sign-in maps one it made for a value nobody mapped (accounts.sso). A group
    nothing maps is never joined by a sign-in, whatever its name."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, primary_key=True, related_name="provider")
    claim = models.CharField(
        _("claim value"),
        max_length=150,
        unique=True,
        help_text=_("A value of the groups claim, exactly as the provider sends it."),
    )

    class Meta:
        verbose_name = _("provider group")
        verbose_name_plural = _("provider groups")

    def __str__(self):
        return f"{self.claim} → {self.group}"


class ProviderMembership(models.Model):
    """A membership a sign-in made (the user in the group because the groups
    claim said so), which a later sign-in ends when the claim stops saying so.
    A membership without one was made by an admin and is left to the admin;
    deleting this record makes it so."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_memberships")
    group = models.ForeignKey("auth.Group", on_delete=models.CASCADE, related_name="provider_memberships")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "group"], name="provider_membership_unique")]
        verbose_name = _("provider membership")
        verbose_name_plural = _("provider memberships")

    def __str__(self):
        return f"{self.user} ∈ {self.group}"
