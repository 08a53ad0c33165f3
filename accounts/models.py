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
