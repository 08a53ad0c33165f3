from django.contrib import admin
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from .models import RetentionPolicy
from .services import retention_plan


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    """One policy per kind, each off until switched on. Each shows what it
    would remove now at its days (a dry run), so the days can be set and
    saved, the dry run read, and only then the policy switched on."""

    list_display = ("kind", "days", "enabled", "dry_run", "last_run_at", "last_removed")
    fields = ("kind", "days", "dry_run", "enabled", "last_run_at", "last_removed")
    readonly_fields = ("kind", "dry_run", "last_run_at", "last_removed")

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("would remove now"))
    def dry_run(self, policy):
        plan = retention_plan(kind=policy.kind, days=policy.days)
        return gettext("%(count)s (%(size)s)") % {"count": f"{plan.count:,}", "size": filesizeformat(plan.bytes)}

    @admin.display(description=_("last removed"))
    def last_removed(self, policy):
        if not policy.last_run_at:
            return "—"
        return f"{policy.last_report.get('count', 0):,}"
