"""A session's workspace quota (docs/protocol.md §6.6): the limits from the settings and the other
workspaces of the session's owner, which count together (the rule itself: agents/tools/quota.py)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from agents.sandbox.site import workspace_name
from agents.tools.quota import MB, DiskQuota
from chat.models import Session


def workspace_quota(*, user_id: int, session_id: str, workspace: Path) -> DiskQuota:
    """The quota of the workspace `workspace` of `user_id`'s session `session_id` (one query when the user
    quota is on: the owner's sessions, whose workspaces stay on disk also when they are closed or hidden)."""
    user_limit = settings.AGENTSITE_USER_DISK_QUOTA_MB * MB or None
    others: tuple[Path, ...] = ()
    if user_limit is not None:
        root = Path(settings.WORKSPACES_DIR)
        ids = Session.objects.filter(user_id=user_id).exclude(id=session_id).values_list("id", flat=True)
        others = tuple(root / workspace_name(user_id=user_id, session_id=other) for other in ids)
    return DiskQuota(
        workspace=workspace,
        workspace_limit=settings.AGENTSITE_WORKSPACE_QUOTA_MB * MB or None,
        user_limit=user_limit,
        others=others,
    )
