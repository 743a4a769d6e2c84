"""Login lockout (docs/protocol.md §6.2, §6.6) with django-axes, counted so that nobody can lift another
account's lock and one person's typos lock out nobody else:

- failures per (username, address): after AGENTSITE_RATE_LOGIN of them (default 5 per 15 minutes) further
  attempts of that username from that address — the right password included — answer 429 with
  `Retry-After` and the page says how long to wait, until the window passes;
- failures per address across usernames: AGENTSITE_LOGIN_ADDRESS_FAILURES (default 30) in the same window
  lock the address for every username;
- a success clears only that username's failures from that address (never another account's: once a success
  cleared every failure of its address, and logging in as oneself between guesses lifted the admin's lock);
- attempts per address: past AGENTSITE_RATE_LOGIN_ADDRESS (default 30 a minute) POSTs to a login page
  (the portal's, the admin's, `/setup/`) answer 429 whatever they hold (security/ratelimit.py counts them,
  in Redis when there is one);
- a form that fails its own validation (`/setup/` passwords that differ) is no failed login: only a password
  that was checked and was wrong is.

django-axes records the failures (its database handler: the same on SQLite and Postgres, shared by every
process, listed in the admin, cleared with `manage.py axes_reset`) and its authentication backend refuses a
locked pair or address before the password is checked; `LockoutHandler` is axes' handler with our two
counts. This module gives axes its limits from our settings, the client address (security/ratelimit.py:
trusted proxies), and the answer: `LoginLockoutMiddleware` stands where axes' own middleware would (whose
async path loses the page it replaces) and answers only attempts that were refused unchecked, so the
attempt that reaches the limit still reads "didn't match" and the next one is refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from functools import lru_cache
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from accounts.logins import login_refused, refused_unchecked
from agentsite.errors import wait_text
from security.ratelimit import hit, ip_or_none, rate_setting, request_address

# With AGENTSITE_RATE_LOGIN=off axes is disabled (settings.py); these values are then never asked for.
_UNLIMITED = 1_000_000
LOCKED = "Too many failed attempts."
RATE_LIMITED = "Too many login attempts from this address."


def failure_limit(request: HttpRequest | None = None, credentials: dict[str, Any] | None = None) -> int:
    """AXES_FAILURE_LIMIT: the count of AGENTSITE_RATE_LOGIN (failures of one username from one address)."""
    rate = rate_setting("AGENTSITE_RATE_LOGIN")
    return rate.count if rate is not None else _UNLIMITED


def address_limit() -> int:
    """Failures from one address across usernames that lock the address (0: none do)."""
    return int(settings.AGENTSITE_LOGIN_ADDRESS_FAILURES)


def cool_off(request: HttpRequest | None = None) -> timedelta:
    """AXES_COOLOFF_TIME: the period of AGENTSITE_RATE_LOGIN."""
    rate = rate_setting("AGENTSITE_RATE_LOGIN")
    return timedelta(seconds=rate.seconds if rate is not None else 1)


def client_ip(request: HttpRequest) -> str | None:
    """AXES_CLIENT_IP_CALLABLE: the client address (None without one: axes stores it in an IP column)."""
    return ip_or_none(request_address(request))


def _recent(username: str | None, address: str | None) -> tuple[QuerySet[Any], QuerySet[Any]]:
    """The failures inside the window: of (username, address), and of the address across usernames."""
    recent = AccessAttempt.objects.filter(attempt_time__gte=timezone.now() - cool_off())
    return recent.filter(username=username, ip_address=address), recent.filter(ip_address=address)


def _failures(attempts: QuerySet[Any]) -> int:
    return int(attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0)


class LockoutHandler(AxesDatabaseHandler):
    """axes' database handler with the counts of this module's docstring (AXES_HANDLER)."""

    def get_failures(self, request: Any, credentials: dict[str, Any] | None = None) -> int:
        """The failures that count for this attempt: its pair's, or the limit itself once its address is
        locked (axes compares the result with `failure_limit`)."""
        pair, address = _recent(get_client_username(request, credentials), request.axes_ip_address)
        failures = _failures(pair)
        limit = address_limit()
        if limit and _failures(address) >= limit:
            return max(failures, failure_limit())
        return failures

    def reset_user_attempts(self, request: Any, credentials: dict[str, Any] | None = None) -> int:
        """A success clears its own username's failures from its address, nothing else."""
        username = get_client_username(request, credentials)
        deleted, _ = AccessAttempt.objects.filter(
            username=username, ip_address=request.axes_ip_address
        ).delete()
        return int(deleted)


def lockout_seconds(request: HttpRequest, username: str | None) -> int:
    """How long the (username, address) pair or the address stays locked (0: not locked).

    Failures leave the window oldest first; a lock ends when those still inside fall below its limit.
    """
    window = cool_off()
    now = timezone.now()
    pair, address = _recent(username or None, client_ip(request))
    longest = 0.0
    for attempts, limit in ((pair, failure_limit()), (address, address_limit())):
        if not limit:
            continue
        rows = list(attempts.order_by("attempt_time").values_list("attempt_time", "failures_since_start"))
        remaining = sum(failures for _, failures in rows)
        for attempt_time, failures in rows:
            if remaining < limit:
                break
            longest = max(longest, (attempt_time + window - now).total_seconds())
            remaining -= failures
    return math.ceil(longest) if longest > 0 else 0


def lockout_response(
    request: HttpRequest,
    *,
    username: str,
    seconds: int | None = None,
    reason: str = LOCKED,
    template: str = "registration/login.html",
    context: dict[str, Any] | None = None,
) -> HttpResponse:
    """429 with Retry-After: the page again, saying why and how long to wait."""
    if seconds is None:
        seconds = lockout_seconds(request, username)
    seconds = max(1, seconds)
    page = {
        "form": AuthenticationForm(request, initial={"username": username}),
        "next": request.POST.get("next", request.GET.get("next", "")),
        **(context or {}),
        "lockout": {"seconds": seconds, "wait": wait_text(seconds), "reason": reason},
    }
    response = render(request, template, page, status=429)
    response["Retry-After"] = str(seconds)
    return response


def login_rate_wait(request: HttpRequest) -> int:
    """Count one login attempt (a POST of a login page) of the request's address: the seconds to wait when
    it is past AGENTSITE_RATE_LOGIN_ADDRESS (0: go on). The first refusal of a window is audited."""
    rate = rate_setting("AGENTSITE_RATE_LOGIN_ADDRESS")
    if rate is None:
        return 0
    counted = hit("login", request_address(request), rate)
    if counted.count <= rate.count:
        return 0
    if counted.count == rate.count + 1:
        login_refused(request, str(request.POST.get("username", "")))
    return counted.retry_after


@lru_cache(maxsize=1)
def _login_paths() -> frozenset[str]:
    return frozenset({reverse("login"), reverse("admin:login")})


class LoginLockoutMiddleware:
    """The portal's and the admin's login: past the per-address rate 429 before the view; a login that
    axes' backend refused unchecked (pair or address locked) 429 after it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in _login_paths():
            wait = login_rate_wait(request)
            if wait:
                username = str(request.POST.get("username", ""))
                return lockout_response(request, username=username, seconds=wait, reason=RATE_LIMITED)
        response = self.get_response(request)
        if refused_unchecked(request):
            credentials = getattr(request, "axes_credentials", None) or {}
            username = str(credentials.get("username") or request.POST.get("username", ""))
            return lockout_response(request, username=username)
        return response
