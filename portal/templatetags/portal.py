"""Template tags of the portal's frame (the top bar's inbox badge) and its text."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
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


@register.filter
def identifier(value: str) -> SafeString:
    """A tool's name (`mcp__server__read_file`) that may break after its underscores and nowhere else: a
    narrow column wrapped such names mid-word (`.identifier` in static/css/site.css)."""
    return mark_safe(escape(value).replace("_", "_<wbr>"))  # escaped first
