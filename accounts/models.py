from django.conf import settings
from django.db import models


class UserPreference(models.Model):
    """What a user chose for themselves, kept across sessions and browsers."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    # One of settings.LANGUAGES, or empty: follow the browser's Accept-Language.
    language = models.CharField(max_length=16, blank=True)

    def __str__(self):
        return f"{self.user}: {self.language or 'browser'}"
