"""Template tags of the portal's frame (the top bar's inbox badge)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.simple_tag
def inbox_unread(user: Any) -> int:
    """Unread inbox items of `user` (0 for anonymous visitors)."""
    if not getattr(user, "is_authenticated", False):
        return 0
    from cron.inbox import inbox_list_for_user

    return inbox_list_for_user(user=user, unread_only=True).count()
