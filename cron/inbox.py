"""The inbox: what a user should see without watching a session (`<entity>_<action>`, keyword-only, typed).

Items come from cron runs (an error always, a result when the job asks for it: cron/services.py writes
those when a run finishes) and from unattended runs that wait for a tool's approval (cron/runner.py).
Users list, read and delete their own items; another user's item is reported exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet

from cron.exceptions import InboxItemNotFound
from cron.models import CronRun, InboxItem

INBOX_BODY_LIMIT = 20_000


def inbox_list_for_user(*, user: User, unread_only: bool = False) -> QuerySet[InboxItem]:
    items = InboxItem.objects.filter(owner=user)
    return items.filter(read=False) if unread_only else items


def inbox_item_get_for_user(*, user: User, item_id: str) -> InboxItem:
    item = InboxItem.objects.filter(id=item_id, owner=user).first()
    if item is None:
        raise InboxItemNotFound(f"Inbox item {item_id} not found")
    return item


def inbox_item_create(
    *,
    owner_id: int,
    source_type: str,
    source_id: str,
    title: str,
    body: str,
    status: str,
    severity: str,
    payload: dict[str, Any],
) -> InboxItem:
    return InboxItem.objects.create(
        owner_id=owner_id,
        source_type=source_type,
        source_id=source_id,
        title=title[:300],
        body=body[:INBOX_BODY_LIMIT],
        status=status,
        severity=severity,
        payload=payload,
    )


def inbox_mark_read(*, user: User, ids: Iterable[str] | None = None, every: bool = False) -> int:
    """Mark the user's items read (the given ids, or all of them); other users' ids are ignored."""
    items = InboxItem.objects.filter(owner=user, read=False)
    if not every:
        items = items.filter(id__in=list(ids or ()))
    return items.update(read=True)


def inbox_item_delete(*, item: InboxItem) -> None:
    item.delete()


def approval_item_create(*, run_id: str, session_id: str, confirmation: dict[str, Any]) -> InboxItem | None:
    """Tell the job's owner that an unattended run waits for a decision in `session_id`."""
    run = CronRun.objects.select_related("job").filter(id=run_id).first()
    if run is None:
        return None
    job = run.job
    tool = str(confirmation.get("tool", "a tool"))
    what = confirmation.get("command") or confirmation.get("arguments")
    body = (
        f"The run of '{job.name}' wants to use '{tool}'"
        + (f": {what}" if what else "")
        + f". Open session {session_id} to approve or refuse it; the run waits up to "
        f"{job.timeout_seconds} s from its start."
    )
    return inbox_item_create(
        owner_id=job.owner_id,
        source_type=InboxItem.SourceType.APPROVAL,
        source_id=str(confirmation.get("confirmation_id", "")),
        title=f"{job.name}: approval needed for {tool}",
        body=body,
        status="pending",
        severity=InboxItem.Severity.WARNING,
        payload={
            "job_id": job.id,
            "run_id": run.id,
            "session_id": session_id,
            "confirmation_id": confirmation.get("confirmation_id"),
            "tool": tool,
            "arguments": confirmation.get("arguments"),
        },
    )


def approval_item_resolve(*, confirmation_id: str, approved: bool, by: str) -> int:
    """Record how a pending approval ended on its inbox item: approved, refused, timeout or cancel."""
    status = "approved" if approved else ("refused" if by in ("user", "policy") else by)
    return InboxItem.objects.filter(
        source_type=InboxItem.SourceType.APPROVAL, source_id=confirmation_id, status="pending"
    ).update(status=status)
