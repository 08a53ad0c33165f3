from django.contrib import admin

from .models import ProviderIdentity, UserPreference


@admin.register(UserPreference)
class UserPreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "language")
    search_fields = ("user__username",)


@admin.register(ProviderIdentity)
class ProviderIdentityAdmin(admin.ModelAdmin):
    """Which single sign-on account signs in as which user: made at a first
    sign-in; an admin may point one at an existing local user (docs/sso.md)."""

    list_display = ("user", "issuer", "subject")
    search_fields = ("user__username", "subject")
    raw_id_fields = ("user",)
