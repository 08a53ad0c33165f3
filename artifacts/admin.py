from django.contrib import admin

from .models import Artifact, ArtifactSession, ArtifactVersion


@admin.register(ArtifactSession)
class ArtifactSessionAdmin(admin.ModelAdmin):
    list_display = ("conversation", "created_at", "updated_at")
    search_fields = ("conversation__title", "conversation__id")
    raw_id_fields = ("conversation",)


class ArtifactVersionInline(admin.TabularInline):
    model = ArtifactVersion
    fields = ("version", "update_type", "created_at")
    readonly_fields = fields
    extra = 0
    show_change_link = True


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ("artifact_id", "title", "content_type", "source", "current_version", "session", "updated_at")
    list_filter = ("source", "content_type", "updated_at")
    search_fields = ("artifact_id", "title", "content", "session__conversation__title")
    raw_id_fields = ("session",)
    # The text and its number are the newest version's; a change here would be
    # on no branch (artifacts.branches). Versions are changed by deleting them.
    readonly_fields = ("content", "current_version", "created_at", "updated_at")
    inlines = [ArtifactVersionInline]


@admin.register(ArtifactVersion)
class ArtifactVersionAdmin(admin.ModelAdmin):
    """Versions are history: viewed here, changed only by deleting their artifact."""

    list_display = ("artifact", "version", "update_type", "run", "created_at")
    list_filter = ("update_type", "created_at")
    search_fields = ("artifact__artifact_id", "content")
    list_select_related = ("artifact", "run")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False
