"""The audit trail in the admin: to read and search, never to add, change or delete (protocol §6.4)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "action", "username", "address", "object_type", "object_id", "summary"]
    list_filter = ["action", "object_type", "created_at"]
    search_fields = ["summary", "username", "object_id", "address"]
    date_hierarchy = "created_at"
    readonly_fields = (
        "created_at",
        "action",
        "user_id",
        "username",
        "address",
        "object_type",
        "object_id",
        "summary",
        "details_shown",
    )
    fields = readonly_fields
    actions = None

    @admin.display(description="details")
    def details_shown(self, obj: AuditEntry) -> Any:
        return format_html("<pre>{}</pre>", json.dumps(obj.details, indent=2, sort_keys=True))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
