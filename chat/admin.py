from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from chat.models import Message, Session, Usage

# A tuple, not a list: one value fits both `fields` and `readonly_fields` as django-stubs types them.
MESSAGE_INLINE_FIELDS = ("message_id", "role", "status", "content", "created_at")


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = MESSAGE_INLINE_FIELDS
    readonly_fields = MESSAGE_INLINE_FIELDS
    can_delete = False
    show_change_link = True


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "user", "agent_name", "status", "paused", "created_at"]
    list_filter = ["status", "paused", "agent_name"]
    search_fields = ["id", "title", "user__username"]
    raw_id_fields = ["user"]
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["message_id", "session", "role", "status", "created_at"]
    list_filter = ["role", "status"]
    search_fields = ["message_id", "session__id", "content"]
    raw_id_fields = ["session"]


@admin.register(Usage)
class UsageAdmin(admin.ModelAdmin):
    """Read-only: rows are added to as model calls end (chat/usage.py)."""

    list_display = ["day", "user", "model", "total_tokens", "prompt_tokens", "completion_tokens", "requests"]
    list_filter = ["day", "model"]
    search_fields = ["user__username", "model"]
    date_hierarchy = "day"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
