"""Template tags of the portal's frame (the top bar's inbox badge)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.simple_tag
def inbox_unread(user: Any) -> int:
    """Unread inbox items of `user` (0 for anonymous visitors)."""
    if not getattr(user, "is_authenticated", False):
        return 0
    from cron.inbox import inbox_list_for_user

    return inbox_list_for_user(user=user, unread_only=True).count()


@register.filter
def ago(value: dt.datetime | None) -> str:
    """ "just now" under a minute (never "0 minutes ago"), else Django's "3 hours ago"."""
    if value is None:
        return ""
    if timezone.now() - value < dt.timedelta(minutes=1):
        return "just now"
    return f"{timesince(value)} ago"
