from django.contrib import admin

from .models import Run, RunEvent


class RunEventInline(admin.TabularInline):
    model = RunEvent
    fields = ("seq", "type", "agent", "data", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "status", "model", "message", "attempts", "created_at", "finished_at")
    list_filter = ("status", "model", "created_at")
    search_fields = ("id", "message__content", "message__conversation__title", "error")
    raw_id_fields = ("message",)
    readonly_fields = ("created_at", "started_at", "finished_at", "heartbeat_at")
    list_select_related = ("message",)
    date_hierarchy = "created_at"
    inlines = [RunEventInline]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ("run", "seq", "type", "agent", "created_at")
    list_filter = ("type", "agent")
    search_fields = ("run__id",)
    raw_id_fields = ("run",)
