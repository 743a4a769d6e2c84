"""Login lockout (docs/protocol.md §6.2) with django-axes: after AGENTSITE_RATE_LOGIN failed attempts
(default 5 per 15 minutes) for one username or from one address, further attempts — the right password
included — answer 429 with `Retry-After` and the login page says how long to wait, until the window
passes; a success resets the count.

django-axes records the failures (its database handler: the same on SQLite and Postgres, shared by
every process, listed in the admin, cleared with `manage.py axes_reset`) and its authentication backend
refuses a locked username or address before the password is checked. This module gives axes its
limits from our setting, the client address (agentsite/ratelimit.py: trusted proxies), and the
answer: `LoginLockoutMiddleware` stands where axes' own middleware would (whose async path loses the
page it replaces) and answers only attempts that were refused unchecked, so the attempt that reaches
the limit still reads "didn't match" and the next one is refused. `/setup/` (no password to check)
asks `setup_blocked_for` and reports its failed submissions with `setup_failed`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib.auth import user_login_failed
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from agentsite.errors import wait_text
from agentsite.ratelimit import ip_or_none, rate_setting, request_address

# With AGENTSITE_RATE_LOGIN=off axes is disabled (settings.py); these values are then never asked for.
_UNLIMITED = 1_000_000


def failure_limit(request: HttpRequest | None = None, credentials: dict[str, Any] | None = None) -> int:
    """AXES_FAILURE_LIMIT: the count of AGENTSITE_RATE_LOGIN."""
    rate = rate_setting("AGENTSITE_RATE_LOGIN")
    return rate.count if rate is not None else _UNLIMITED


def cool_off(request: HttpRequest | None = None) -> timedelta:
    """AXES_COOLOFF_TIME: the period of AGENTSITE_RATE_LOGIN."""
    rate = rate_setting("AGENTSITE_RATE_LOGIN")
    return timedelta(seconds=rate.seconds if rate is not None else 1)


def client_ip(request: HttpRequest) -> str | None:
    """AXES_CLIENT_IP_CALLABLE: the client address (None without one: axes stores it in an IP column)."""
    return ip_or_none(request_address(request))


def lockout_seconds(request: HttpRequest, username: str | None) -> int:
    """How long the username or the request's address stays locked (0: not locked).

    Failures leave the window oldest first; a lock ends when those still inside fall below the limit.
    """
    limit, window = failure_limit(), cool_off()
    now = timezone.now()
    longest = 0.0
    for match in ({"username": username} if username else None, {"ip_address": client_ip(request)}):
        if match is None:
            continue
        rows = (
            AccessAttempt.objects.filter(**match, attempt_time__gte=now - window)
            .order_by("attempt_time")
            .values_list("attempt_time", "failures_since_start")
        )
        attempts = list(rows)
        remaining = sum(failures for _, failures in attempts)
        for attempt_time, failures in attempts:
            if remaining < limit:
                break
            longest = max(longest, (attempt_time + window - now).total_seconds())
            remaining -= failures
    return math.ceil(longest) if longest > 0 else 0


def lockout_response(
    request: HttpRequest,
    *,
    username: str,
    template: str = "registration/login.html",
    context: dict[str, Any] | None = None,
) -> HttpResponse:
    """429 with Retry-After: the page again, saying how long to wait."""
    seconds = max(1, lockout_seconds(request, username))
    page = {
        "form": AuthenticationForm(request, initial={"username": username}),
        "next": request.POST.get("next", request.GET.get("next", "")),
        **(context or {}),
        "lockout": {"seconds": seconds, "wait": wait_text(seconds)},
    }
    response = render(request, template, page, status=429)
    response["Retry-After"] = str(seconds)
    return response


def refused_unchecked(request: Any) -> bool:
    """Whether axes refused this login attempt without checking the password (locked out). axes sets
    `axes_failures_since_start` when it counted an attempt's failure: that attempt was checked (and may
    just have reached the limit); a refused one was never checked. (Also read by the audit trail.)"""
    return bool(getattr(request, "axes_locked_out", False)) and (
        getattr(request, "axes_failures_since_start", 0) is None
    )


class LoginLockoutMiddleware:
    """Answers a login that axes' backend refused unchecked (username or address locked) with 429."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if refused_unchecked(request):
            credentials = getattr(request, "axes_credentials", None) or {}
            username = str(credentials.get("username") or request.POST.get("username", ""))
            return lockout_response(request, username=username)
        return response


def setup_blocked_for(request: HttpRequest, username: str) -> int:
    """Seconds until /setup/ may be tried again from this address or for this username (0: now)."""
    if not AxesProxyHandler.is_locked(request, {"username": username}):
        return 0
    return max(1, lockout_seconds(request, username))


def setup_failed(request: HttpRequest, username: str) -> None:
    """A refused /setup/ submission counts as a failed login attempt."""
    user_login_failed.send(sender=__name__, credentials={"username": username}, request=request)
