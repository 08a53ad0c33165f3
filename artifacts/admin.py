from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.translation import gettext

from agents.selectors import session_active_runs
from artifactflow.admin import ServiceDeleteMixin

from .models import Artifact, ArtifactSession, ArtifactVersion
from .services import artifact_delete


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
class ArtifactAdmin(ServiceDeleteMixin, admin.ModelAdmin):
    list_display = ("artifact_id", "title", "content_type", "source", "current_version", "session", "updated_at")
    list_filter = ("source", "content_type", "updated_at")
    search_fields = ("artifact_id", "title", "content", "session__conversation__title")
    raw_id_fields = ("session",)
    # The text and its number are the newest version's; a change here would be
    # on no branch (artifacts.branches). Versions are changed by deleting them.
    readonly_fields = ("content", "current_version", "created_at", "updated_at")
    inlines = [ArtifactVersionInline]

    def delete_model(self, request, obj):
        # Through the service: it refuses an artifact a running turn is writing.
        artifact_delete(artifact=obj, active_runs=session_active_runs(session_id=obj.session_id))

    def delete_queryset(self, request, queryset):
        for artifact in queryset:
            try:
                artifact_delete(artifact=artifact, active_runs=session_active_runs(session_id=artifact.session_id))
            except ValidationError as exc:
                self.message_user(
                    request,
                    gettext("%(id)s was kept: %(reason)s")
                    % {"id": artifact.artifact_id, "reason": " ".join(exc.messages)},
                    messages.ERROR,
                )


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
