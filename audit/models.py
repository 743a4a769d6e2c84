"""One row per audited event (docs/protocol.md §6.4). Rows are only ever added, and deleted by the retention
prune (audit/services.py `audit_prune`); nothing edits them."""

from __future__ import annotations

from typing import Any, TypedDict

from django.db import models
from django.utils import timezone

from agentsite.isotime import iso


class AuditUserDict(TypedDict):
    id: str
    username: str


class AuditEntryDict(TypedDict):
    id: str
    created_at: str
    user: AuditUserDict | None
    address: str | None
    action: str
    object_type: str
    object_id: str
    summary: str
    details: dict[str, Any]


class AuditEntry(models.Model):
    """Who (`user_id`, null for the system; `username` as it was then), from where (`address`), did what
    (`action`) to which object (`object_type`, `object_id`), in a sentence (`summary`) and in detail.

    `user_id` is a plain column, not a foreign key: an entry outlives the account it names.
    """

    created_at = models.DateTimeField(default=timezone.now)
    user_id = models.BigIntegerField(null=True, blank=True)
    username = models.CharField(max_length=150, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    action = models.CharField(max_length=40)
    object_type = models.CharField(max_length=40, blank=True)
    object_id = models.CharField(max_length=300, blank=True)
    summary = models.CharField(max_length=500, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "agentsite_auditentry"  # the table it had in the agentsite app (audit/migrations/0001)
        ordering = ["-created_at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit trail"
        indexes = [
            models.Index(fields=["created_at", "id"], name="audit_created"),
            models.Index(fields=["action", "created_at"], name="audit_action_created"),
            models.Index(fields=["user_id", "created_at"], name="audit_user_created"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.action} {self.summary}"

    def to_dict(self) -> AuditEntryDict:
        user: AuditUserDict | None = None
        if self.user_id is not None:
            user = {"id": str(self.user_id), "username": self.username}
        return {
            "id": str(self.pk),
            "created_at": iso(self.created_at),
            "user": user,
            "address": self.address,
            "action": self.action,
            "object_type": self.object_type,
            "object_id": self.object_id,
            "summary": self.summary,
            "details": self.details,
        }
