from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.template.response import TemplateResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.selectors import conversations_busy
from artifactflow.admin import ServiceDeleteMixin
from artifacts.cleanup import bytes_text, cleanup_apply, cleanup_plan
from artifacts.models import ArtifactSession
from audit.admin import StaffViewAudited
from audit.models import AuditEvent
from audit.services import audit_record
from conversations import lifecycle

from .models import Conversation, ConversationShare, Message


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("id", "parent", "content", "created_at")
    readonly_fields = fields
    extra = 0
    show_change_link = True
    can_delete = False


class ConversationShareInline(admin.TabularInline):
    model = ConversationShare
    fields = ("everyone", "user", "group", "created_by", "created_at")
    readonly_fields = ("created_by", "created_at")
    raw_id_fields = ("user",)
    extra = 0


@admin.register(ConversationShare)
class ConversationShareAdmin(admin.ModelAdmin):
    """Every share of every conversation. Deleting one here closes the pages
    it opened, as revoking it in the portal does (conversations.signals)."""

    list_display = ("conversation", "owner", "audience", "created_by", "created_at")
    list_filter = ("everyone", "group", "created_at")
    search_fields = ("conversation__title", "conversation__id", "user__username", "group__name")
    raw_id_fields = ("conversation", "user", "created_by")
    list_select_related = ("conversation__owner", "user", "group", "created_by")
    readonly_fields = ("created_at",)
    date_hierarchy = "created_at"

    @admin.display(description=_("owner"), ordering="conversation__owner__username")
    def owner(self, obj):
        return obj.conversation.owner

    @admin.display(description=_("shared with"))
    def audience(self, obj):
        if obj.everyone:
            return gettext("everyone signed in")
        if obj.group_id:
            return gettext("group %(name)s") % {"name": obj.group.name}
        return obj.user.get_username()

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(Conversation)
class ConversationAdmin(StaffViewAudited, ServiceDeleteMixin, admin.ModelAdmin):
    list_display = ("title", "owner", "message_count", "forked_from", "retention_hold", "created_at", "updated_at")
    list_filter = (
        "created_at",
        "updated_at",
        ("forked_from", admin.EmptyFieldListFilter),
        "retention_hold",
        "owner",
    )
    search_fields = ("title", "id", "owner__username", "messages__content")

    def audited_owner(self, conversation):
        return conversation.owner

    raw_id_fields = ("owner", "active_branch")
    # A hold is put and released by the actions, which the audit trail records.
    readonly_fields = ("id", "forked_from", "forked_at", "retention_hold", "created_at", "updated_at")
    date_hierarchy = "created_at"
    inlines = [ConversationShareInline, MessageInline]
    actions = ["conversations_delete", "artifacts_cleanup", "holds_put", "holds_release"]

    def get_actions(self, request):
        # Django's bulk delete would skip the service's refusal of busy conversations.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def get_deleted_objects(self, objs, request):
        deleted, model_count, _, protected = super().get_deleted_objects(objs, request)
        # Runs and their events cannot be deleted on their own, only with their conversation.
        return deleted, model_count, set(), protected

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            # A conversation has its artifact session from the start, as conversations.lifecycle.conversation_start makes it.
            ArtifactSession.objects.get_or_create(conversation=obj)

    def delete_model(self, request, obj):
        lifecycle.conversation_delete(conversation=obj)

    def save_formset(self, request, form, formset, change):
        # A share added here is the administrator's.
        for share in formset.save(commit=False):
            if isinstance(share, ConversationShare) and share.created_by_id is None:
                share.created_by = request.user
            share.save()
        for share in formset.deleted_objects:
            share.delete()
        formset.save_m2m()

    @admin.action(description=_("Put on hold: no retention policy removes them"), permissions=["change"])
    def holds_put(self, request, queryset):
        self._hold(request, queryset, held=True)

    @admin.action(description=_("Release from hold"), permissions=["change"])
    def holds_release(self, request, queryset):
        self._hold(request, queryset, held=False)

    def _hold(self, request, queryset, *, held: bool):
        changed = list(queryset.exclude(retention_hold=held))
        with transaction.atomic():
            Conversation.objects.filter(pk__in=[c.pk for c in changed]).update(retention_hold=held)
            for conversation in changed:
                audit_record(
                    action=AuditEvent.Action.CHANGE, obj=conversation, changes={"retention_hold": [not held, held]}
                )
        self.message_user(
            request,
            gettext("%(count)s conversation(s) put on hold.") % {"count": len(changed)}
            if held
            else gettext("%(count)s conversation(s) released from hold.") % {"count": len(changed)},
            messages.SUCCESS,
        )

    @admin.action(description=_("Delete selected conversations…"), permissions=["delete"])
    def conversations_delete(self, request, queryset):
        if request.POST.get("post") != "yes":
            return self._confirm(request, queryset, "admin/conversations/conversation/delete_confirm.html", {})
        deleted, refused = 0, []
        for conversation in queryset:
            try:
                lifecycle.conversation_delete(conversation=conversation)
            except ValidationError as exc:
                refused.append(f"{conversation.title or conversation.pk}: {' '.join(exc.messages)}")
            else:
                deleted += 1
        if deleted:
            self.message_user(
                request,
                gettext("Deleted %(count)s conversation(s).") % {"count": deleted},
                messages.SUCCESS,
            )
        for reason in refused:
            self.message_user(request, gettext("Not deleted, %(reason)s") % {"reason": reason}, messages.ERROR)

    def has_cleanup_permission(self, request):
        # The cleanup deletes artifacts and leaves the conversations: it is the artifacts' permission it needs.
        return request.user.has_perm("artifacts.delete_artifact")

    @admin.action(description=_("Clean up artifacts (dry run)…"), permissions=["cleanup"])
    def artifacts_cleanup(self, request, queryset):
        include_all = request.POST.get("include_all") == "on"
        plan = cleanup_plan(
            busy=conversations_busy(),
            conversation_ids=list(queryset.values_list("pk", flat=True)),
            include_all=include_all,
        )
        if request.POST.get("post") == "yes":
            report = cleanup_apply(plan=plan, busy=conversations_busy())
            self.message_user(
                request,
                gettext("Removed %(count)s artifact(s), %(bytes)s.")
                % {"count": len(report.removed), "bytes": bytes_text(report.bytes)},
                messages.SUCCESS,
            )
            for candidate, reason in report.skipped:
                self.message_user(
                    request,
                    gettext("Kept %(id)s: %(reason)s") % {"id": candidate.artifact_id, "reason": reason},
                    messages.WARNING,
                )
            return None
        context = {
            "plan": plan,
            "include_all": include_all,
            "bytes": bytes_text(plan.bytes),
            "title": gettext("Clean up artifacts: dry run"),
        }
        return self._confirm(request, queryset, "admin/conversations/conversation/cleanup.html", context)

    def _confirm(self, request, queryset, template: str, context: dict):
        return TemplateResponse(
            request,
            template,
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": gettext("Are you sure?"),
                "conversations": queryset.select_related("owner"),
                "action": request.POST.get("action"),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                **context,
            },
        )

    def get_queryset(self, request):
        return (
            super().get_queryset(request).select_related("owner", "forked_from").annotate(_messages=Count("messages"))
        )

    @admin.display(description=_("messages"), ordering="_messages")
    def message_count(self, obj):
        return obj._messages


@admin.register(Message)
class MessageAdmin(StaffViewAudited, admin.ModelAdmin):
    list_display = ("id", "short_content", "conversation", "parent", "created_at")
    list_filter = ("created_at",)
    search_fields = ("content", "response", "conversation__title", "conversation__id")
    raw_id_fields = ("conversation", "parent")
    list_select_related = ("conversation",)
    date_hierarchy = "created_at"

    def audited_owner(self, message):
        return message.conversation.owner

    @admin.display(description=_("content"))
    def short_content(self, obj):
        return obj.content[:80]
