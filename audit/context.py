"""Who is acting, and from which address: the request at hand, for the entries written while it runs.

`AuditContextMiddleware` keeps the current request in a context variable for the length of the request,
so that an entry written deep below a view (a model's diff, audit/tracking.py) names the user
who made the change. The user is read when the entry is written, not when the request arrives: DRF
authenticates an API key inside the view, and sets the user on the request then.

Work that no request drives (the scheduler, start-up, management commands) has no actor: its entries
have `user` null. A chat turn's entries name the chat's owner explicitly (services.py `TurnAudit`).
"""

from __future__ import annotations

import contextvars
import ipaddress
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse

from security.ratelimit import request_address

# A weak reference: tasks started during a request (a chat turn it submitted) inherit a copy of its context
# and outlive it; they must neither keep the request alive nor act in its name once it is answered.
_request: contextvars.ContextVar[weakref.ref[HttpRequest] | None] = contextvars.ContextVar(
    "audit_request", default=None
)


@dataclass(frozen=True)
class Actor:
    """Who an entry names: a user (id and username) or nobody (the system), and an address or none."""

    user_id: int | None = None
    username: str = ""
    address: str | None = None


SYSTEM = Actor()


def client_address(request: Any) -> str | None:
    """The address the request came from: the peer's, or behind a trusted proxy (AGENTSITE_TRUSTED_PROXIES)
    the client's from X-Forwarded-For, as the lockout and the rate limits count it. None when there is no
    request or it is not an IP address."""
    if getattr(request, "META", None) is None:
        return None
    return _ip(request_address(request))


def _ip(value: Any) -> str | None:
    if not value or not isinstance(value, str):
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def actor_of(user: Any, address: str | None = None) -> Actor:
    if user is None or not getattr(user, "is_authenticated", False):
        return Actor(address=address)
    return Actor(user_id=user.pk, username=user.get_username(), address=address)


def current_actor() -> Actor:
    """The actor of the request at hand (its user as authenticated by now, and its address), else SYSTEM."""
    ref = _request.get()
    request = ref() if ref is not None else None
    if request is None:
        return SYSTEM
    return actor_of(getattr(request, "user", None), client_address(request))


@contextmanager
def acting(request: HttpRequest | None) -> Iterator[None]:
    """Entries written inside name this request's user and address (None: the system)."""
    token = _request.set(weakref.ref(request) if request is not None else None)
    try:
        yield
    finally:
        _request.reset(token)


class AuditContextMiddleware:
    """Makes the request the audit trail's context while its view runs (after AuthenticationMiddleware)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with acting(request):
            return self.get_response(request)
