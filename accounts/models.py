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
    """A group the provider's groups claim has named: sign-ins add users to it
    and take them out of it. Groups the admin made alone are left to the admin."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, primary_key=True, related_name="provider")

    def __str__(self):
        return str(self.group)
