import itertools
import json

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.urls import path
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from artifactflow.csvfiles import csv_response

from .models import AuditEvent
from .services import audit_record

CSV_COLUMNS = ("at", "actor_name", "action", "object_type", "object_id", "object_repr", "address", "changes", "detail")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only for every role, superusers included: nothing is added,
    changed or deleted here. Filtered by person, action and date, and
    exported as CSV as filtered."""

    list_display = ("at", "actor_name", "action", "object_type", "object_repr", "address")
    list_filter = ("action", "at", ("actor", admin.RelatedOnlyFieldListFilter), "object_type")
    search_fields = ("actor_name", "object_repr", "object_id", "address")
    date_hierarchy = "at"
    list_per_page = 100
    fields = (
        "at",
        "actor",
        "actor_name",
        "action",
        "object_type",
        "object_id",
        "object_repr",
        "address",
        "changes_table",
        "detail",
    )
    readonly_fields = fields
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        return {}

    @admin.display(description=_("changes"))
    def changes_table(self, event):
        if not event.changes:
            return "—"
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td>{}</td><td>→</td><td>{}</td></tr>",
            ((name, _shown(change, 0), _shown(change, 1)) for name, change in event.changes.items()),
        )
        return format_html("<table>{}</table>", rows)

    def get_urls(self):
        export = self.admin_site.admin_view(require_GET(self.export_view))
        return [path("export/", export, name="audit_auditevent_export"), *super().get_urls()]

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "export_query": request.GET.urlencode()}
        return super().changelist_view(request, extra_context=extra_context)

    def export_view(self, request):
        """The records the list shows with the same filters, all of them, as CSV."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        changelist = self.get_changelist_instance(request)
        events = changelist.get_queryset(request)
        rows = (
            [
                event.at.isoformat(),
                event.actor_name,
                event.action,
                event.object_type,
                event.object_id,
                event.object_repr,
                event.address or "",
                _json(event.changes),
                _json(event.detail),
            ]
            for event in events.iterator()
        )
        return csv_response(filename="audit-trail.csv", rows=itertools.chain([CSV_COLUMNS], rows))


def _shown(change, index):
    try:
        value = change[index]
    except (IndexError, KeyError, TypeError):
        return ""
    return "—" if value is None else value


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False) if value else ""


class StaffViewAudited:
    """A ModelAdmin mixin: a staff member opening another person's object
    (its page in the admin) is recorded. `audited_owner(obj)` says whose it is."""

    def audited_owner(self, obj):
        raise NotImplementedError

    def get_object(self, request, object_id, from_field=None):
        # Read once per request: the page and the record ask for it.
        cache = request.__dict__.setdefault("_audited_objects", {})
        key = (self.model, object_id, from_field)
        if key not in cache:
            cache[key] = super().get_object(request, object_id, from_field)
        return cache[key]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        response = super().change_view(request, object_id, form_url, extra_context)
        if request.method == "GET" and response.status_code == 200:
            obj = self.get_object(request, object_id)
            owner = self.audited_owner(obj) if obj is not None else None
            if owner is not None and owner != request.user:
                audit_record(action=AuditEvent.Action.ADMIN_VIEW, obj=obj, detail={"owner": owner.get_username()})
        return response
