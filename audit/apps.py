from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The audit trail (docs/protocol.md §6.4). Its model keeps the table it had in the `agentsite` app."""

    name = "audit"
    verbose_name = "Audit trail"
