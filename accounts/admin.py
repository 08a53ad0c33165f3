from django.contrib import admin

from .models import ProviderGroup, ProviderIdentity, ProviderMembership, UserPreference


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


@admin.register(ProviderGroup)
class ProviderGroupAdmin(admin.ModelAdmin):
    """Which value of the groups claim fills which group: an admin maps a value
    to a group of theirs here; a sign-in adds the groups it makes (docs/sso.md)."""

    list_display = ("claim", "group")
    search_fields = ("claim", "group__name")
    autocomplete_fields = ("group",)

    def get_readonly_fields(self, request, obj=None):
        # The group is the row's key: another group is another row (delete this one, add that).
        return ("group",) if obj else ()


@admin.register(ProviderMembership)
class ProviderMembershipAdmin(admin.ModelAdmin):
    """The memberships sign-ins made, which sign-ins end. Deleting one leaves
    the person in the group as if an admin had added them."""

    list_display = ("user", "group")
    list_filter = ("group",)
    search_fields = ("user__username", "group__name")
    list_select_related = ("user", "group")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
