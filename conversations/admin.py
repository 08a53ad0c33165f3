from django.contrib import admin
from django.db.models import Count

from .models import Conversation, Message


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("id", "parent", "content", "created_at")
    readonly_fields = fields
    extra = 0
    show_change_link = True
    can_delete = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "message_count", "created_at", "updated_at")
    list_filter = ("created_at", "updated_at", "owner")
    search_fields = ("title", "id", "owner__username", "messages__content")
    raw_id_fields = ("owner", "active_branch")
    readonly_fields = ("id", "created_at", "updated_at")
    date_hierarchy = "created_at"
    inlines = [MessageInline]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("owner").annotate(_messages=Count("messages"))

    @admin.display(description="messages", ordering="_messages")
    def message_count(self, obj):
        return obj._messages


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("id", "short_content", "conversation", "parent", "created_at")
    list_filter = ("created_at",)
    search_fields = ("content", "response", "conversation__title", "conversation__id")
    raw_id_fields = ("conversation", "parent")
    list_select_related = ("conversation",)
    date_hierarchy = "created_at"

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content[:80]
