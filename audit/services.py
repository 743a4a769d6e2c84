"""Writing the audit trail: one entry (`audit_record`), the retention (`audit_prune`), and the sink a chat
turn writes through (`TurnAudit`).

`audit_record` writes in the caller's transaction: a service records its change inside the
`transaction.atomic()` that makes it, so the change and its entry are committed together or not at all.
Entries of what changes no row (a login, a command a tool ran) are written on their own.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentsite.db import database_sync_to_async
from audit.actions import AUDIT_PRUNE
from audit.context import Actor, current_actor
from audit.models import AuditEntry

logger = logging.getLogger("audit")

MAX_TEXT = 4000  # a string in `details` is cut here (a file's content, a long prompt)
MAX_ITEMS = 200  # and a list or object after this many items
MAX_DEPTH = 8


def bounded(value: Any, depth: int = 0) -> Any:
    """`value` as JSON-safe data of bounded size: long strings cut (saying how much), deep or wide
    structures shortened. What an entry keeps must not grow with what a user or a model sends."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT:
            return value
        return f"{value[:MAX_TEXT]}… [{len(value) - MAX_TEXT} more characters]"
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = list(value.items())
        shown = {str(key): bounded(item, depth + 1) for key, item in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            shown["…"] = f"{len(items) - MAX_ITEMS} more"
        return shown
    if isinstance(value, list | tuple | set | frozenset):
        listed = list(value)
        shown_list = [bounded(item, depth + 1) for item in listed[:MAX_ITEMS]]
        if len(listed) > MAX_ITEMS:
            shown_list.append(f"… {len(listed) - MAX_ITEMS} more")
        return shown_list
    if isinstance(value, dt.datetime):
        from agentsite.isotime import iso

        return iso(value)
    return bounded(str(value), depth)


def audit_record(
    action: str,
    *,
    object_type: str = "",
    object_id: Any = "",
    summary: str = "",
    details: dict[str, Any] | None = None,
    actor: Actor | None = None,
) -> AuditEntry:
    """Write one entry in the current transaction. `actor`: who acted (None: the request at hand, or the
    system when there is none)."""
    who = actor if actor is not None else current_actor()
    return AuditEntry.objects.create(
        user_id=who.user_id,
        username=who.username[:150],
        address=who.address,
        action=action,
        object_type=object_type,
        object_id=str(object_id)[:300],
        summary=summary[:500],
        details=bounded(details or {}),
    )


def retention_cutoff(now: dt.datetime | None = None) -> dt.datetime | None:
    """Entries older than this go (`AGENTSITE_AUDIT_RETENTION_DAYS`; 0: kept for ever → None)."""
    days = settings.AGENTSITE_AUDIT_RETENTION_DAYS
    if not days:
        return None
    return (now or timezone.now()) - dt.timedelta(days=days)


@transaction.atomic
def audit_prune(*, now: dt.datetime | None = None) -> int:
    """Delete the entries past the retention; how many. The prune itself is recorded (by the system), so
    that the trail says where it was shortened. Run by every scheduler once an hour (cron/scheduler.py)."""
    cutoff = retention_cutoff(now)
    if cutoff is None:
        return 0
    deleted, _ = AuditEntry.objects.filter(created_at__lt=cutoff).delete()
    if deleted:
        days = settings.AGENTSITE_AUDIT_RETENTION_DAYS
        audit_record(
            AUDIT_PRUNE,
            summary=f"{deleted} entries older than {days} days deleted",
            details={"deleted": deleted, "before": cutoff, "retention_days": days},
            actor=Actor(),
        )
    return deleted


class TurnAudit:
    """What a chat turn does, written down in the name of the chat's owner (agents/tools/base.py
    `AuditSink`): approval decisions (agents/turn.py), commands (agents/tools/shell.py) and runner starts
    (acp/tool.py). A failed write is logged, never raised: the thing it records has happened already."""

    def __init__(self, *, user_id: int | None, session_id: str) -> None:
        self.user_id = user_id
        self.session_id = session_id
        self._username: str | None = None

    async def __call__(self, action: str, *, summary: str, details: dict[str, Any]) -> None:
        try:
            await database_sync_to_async(self._write)(action, summary, details)
        except Exception:
            logger.exception(
                "could not write the audit entry %s (%s) of session %s", action, summary, self.session_id
            )

    def _write(self, action: str, summary: str, details: dict[str, Any]) -> None:
        if self._username is None:
            self._username = _username_of(self.user_id)
        audit_record(
            action,
            object_type="session",
            object_id=self.session_id,
            summary=summary,
            details={"session_id": self.session_id, **details},
            actor=Actor(user_id=self.user_id, username=self._username),
        )


def _username_of(user_id: int | None) -> str:
    from django.contrib.auth import get_user_model

    if user_id is None:
        return ""
    model = get_user_model()
    found = model.objects.filter(pk=user_id).values_list(model.USERNAME_FIELD, flat=True).first()
    return str(found or "")
