from django.contrib import admin
from django.utils import timezone

from .models import Project, ProjectMember, Schedule
from .schedules import schedule_next, schedule_pause, schedule_resume


class ProjectMemberInline(admin.TabularInline):
    model = ProjectMember
    fk_name = "project"
    extra = 0
    autocomplete_fields = ["user", "group"]
    readonly_fields = ["created_by", "created_at"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "created_at", "updated_at"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner"]
    autocomplete_fields = ["owner"]
    inlines = [ProjectMemberInline]


@admin.register(ProjectMember)
class ProjectMemberAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "group", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["project__name", "user__username", "group__name"]
    list_select_related = ["project", "user", "group"]
    autocomplete_fields = ["project", "user", "group"]
    readonly_fields = ["created_by", "created_at"]


@admin.action(description="Resume the selected schedules", permissions=["change"])
def schedules_resume(modeladmin, request, queryset):
    for schedule in queryset.filter(paused_at__isnull=False):
        schedule_resume(schedule=schedule)


@admin.action(description="Pause the selected schedules", permissions=["change"])
def schedules_pause(modeladmin, request, queryset):
    for schedule in queryset.filter(paused_at__isnull=True):
        schedule_pause(schedule=schedule, reason=f"Paused by {request.user.get_username()} in the admin.")


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ["conversation", "owner", "frequency", "time", "time_zone", "next_run_at", "failures", "paused_at"]
    list_filter = ["frequency", ("paused_at", admin.EmptyFieldListFilter)]
    search_fields = ["conversation__title", "conversation__owner__username", "question"]
    list_select_related = ["conversation__owner"]
    readonly_fields = ["conversation", "next_run_at", "last_run_at", "failures", "last_error", "created_at"]
    actions = [schedules_pause, schedules_resume]

    def save_model(self, request, obj, form, change):
        # Changed by hand, it runs next by its new times (a paused one stays paused).
        if obj.paused_at is None:
            obj.next_run_at = schedule_next(schedule=obj, after=timezone.now())
        super().save_model(request, obj, form, change)

    @admin.display(ordering="conversation__owner__username")
    def owner(self, schedule):
        return schedule.conversation.owner
