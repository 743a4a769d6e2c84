"""Rate limits (docs/protocol.md §6.2), counted in Django's cache: Redis when REDIS_URL is set, so that a
limit holds across server processes; this process's memory otherwise (one process).

- `client_address`: whom a request or socket comes from — the peer, or behind one of
  AGENTSITE_TRUSTED_PROXIES the address that proxy saw (X-Forwarded-For). The one rule for the rate limits,
  the login lockout and the audit trail's addresses; with no trusted proxy (the default) no
  X-Forwarded-For is believed, also not from loopback.
- `hit`/`peek`: a counting window per (scope, who) that opens at its first hit and lasts the rate's
  period; `Retry-After` is the time until it closes. Counting is one atomic increment (INCR in Redis).
- REST: `UserRateThrottle` (DRF, AGENTSITE_RATE_USER per user) and `AnonymousRateLimitMiddleware`
  (AGENTSITE_RATE_ANON per address). The latter sits before DRF because DRF checks permissions before
  throttles: a request without credentials would be refused with 401 before its address was counted.

Knows nothing of accounts: the check of an API key against the wrong keys an address sent
(AGENTSITE_RATE_FAILED_KEYS) counts with `hit`/`peek` here but lives with the keys (accounts/services.py
`key_authenticate`).

When the cache does not answer (Redis restarting), requests are not limited rather than refused:
the rest of the server says itself when Redis is gone, and a limit is not worth an outage.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from rest_framework.throttling import BaseThrottle

from agentsite.env import Rate, parse_rate
from agentsite.errors import rate_limited_response

logger = logging.getLogger(__name__)

# A window's counter outlives the window by this much, so that a hit that read the window's start just
# before it closed never recreates the counter without an expiry.
_COUNTER_GRACE_SECONDS = 60
_WARN_EVERY_SECONDS = 60.0
_last_warning = 0.0


@lru_cache(maxsize=32)
def _parse(text: str) -> Rate | None:
    return parse_rate(text)


def rate_setting(name: str) -> Rate | None:
    """The rate a setting names (settings.py checked it at start-up); None: no limit."""
    return _parse(str(getattr(settings, name)))


# --- who is asking -----------------------------------------------------------------------------------


UNKNOWN = "unknown"  # a request without a peer address (a test client, a Unix socket)


def ip_or_none(address: str) -> str | None:
    """`address` when it is an IP address (IPv6 without brackets; an IPv4-mapped IPv6 address, as a
    dual-stack listener sees IPv4 peers, as the IPv4 address it is), else None."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)


def client_address(peer: str | None, forwarded_for: str | None) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy; then the last address of
    X-Forwarded-For that is not one of the trusted proxies (earlier entries are the client's to forge;
    one that is not an address at all means the proxies did not write that header: the peer is used)."""
    proxies = settings.AGENTSITE_TRUSTED_PROXIES
    if not peer:
        return UNKNOWN
    peer_ip = ip_or_none(peer)
    if peer_ip is not None:
        peer = peer_ip
    if not proxies or not forwarded_for or peer_ip is None or not _trusted(peer_ip, proxies):
        return peer
    for hop in reversed([hop.strip() for hop in forwarded_for.split(",") if hop.strip()]):
        address = ip_or_none(hop)
        if address is None:
            return peer
        if not _trusted(address, proxies):
            return address
    return peer


def _trusted(address: str, proxies: Iterable[Any]) -> bool:
    ip = ipaddress.ip_address(address)
    return any(ip in network for network in proxies)


def request_address(request: HttpRequest) -> str:
    """The client address of an HTTP request."""
    return client_address(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR"))


def scope_address(scope: Mapping[str, Any]) -> str:
    """The client address of an ASGI scope (a WebSocket). Several X-Forwarded-For lines are one list, as
    Django joins a request's."""
    client = scope.get("client") or (None,)
    headers = scope.get("headers", [])
    lines = [value.decode("latin-1") for name, value in headers if name == b"x-forwarded-for"]
    return client_address(client[0], ",".join(lines) or None)


# --- counting ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """`count` hits in the current window, which closes in `retry_after` seconds (0: no window)."""

    count: int
    retry_after: int


def _key(scope: str, who: str) -> str:
    if len(who) > 64 or not who.isprintable() or " " in who:
        who = hashlib.sha256(who.encode()).hexdigest()
    return f"ratelimit:{scope}:{who}"


def _cache_failed(exc: Exception) -> Hit:
    global _last_warning
    now = time.monotonic()
    if now - _last_warning > _WARN_EVERY_SECONDS:
        _last_warning = now
        logger.warning("rate limits are not counted: the cache does not answer (%s)", exc)
    return Hit(0, 0)


def _closes_in(started: float, rate: Rate, now: float) -> int:
    return max(1, math.ceil(started + rate.seconds - now))


def hit(scope: str, who: str, rate: Rate) -> Hit:
    """Count one event of `who` in `scope` and return the count of its window."""
    cache = caches["default"]
    key = _key(scope, who)
    now = time.time()
    try:
        started = cache.get(key)
        if started is None:
            cache.add(key, now, timeout=rate.seconds)
            started = cache.get(key, now)
        counter = f"{key}:{float(started):.6f}"
        try:
            count = cache.incr(counter)
        except ValueError:  # the window's first hit (or its counter just expired)
            if cache.add(counter, 1, timeout=rate.seconds + _COUNTER_GRACE_SECONDS):
                count = 1
            else:
                count = cache.incr(counter)
    except Exception as exc:  # the cache's own errors (redis.ConnectionError, timeouts): see the docstring
        return _cache_failed(exc)
    return Hit(int(count), _closes_in(float(started), rate, now))


def peek(scope: str, who: str, rate: Rate) -> Hit:
    """The count of the current window of `who` in `scope`, without counting."""
    cache = caches["default"]
    key = _key(scope, who)
    try:
        started = cache.get(key)
        if started is None:
            return Hit(0, 0)
        count = cache.get(f"{key}:{float(started):.6f}", 0)
    except Exception as exc:
        return _cache_failed(exc)
    return Hit(int(count), _closes_in(float(started), rate, time.time()))


# --- REST --------------------------------------------------------------------------------------------

USER_REASON = "Too many requests for this account."
ANON_REASON = "Too many requests from this address."


class UserRateThrottle(BaseThrottle):
    """DRF: AGENTSITE_RATE_USER requests per authenticated user (anonymous ones: the middleware below)."""

    reason = USER_REASON

    def __init__(self) -> None:
        self.retry_after = 0

    def allow_request(self, request: Any, view: Any) -> bool:
        rate = rate_setting("AGENTSITE_RATE_USER")
        user = getattr(request, "user", None)
        if rate is None or user is None or not user.is_authenticated:
            return True
        counted = hit("user", str(user.pk), rate)
        self.retry_after = counted.retry_after
        return counted.count <= rate.count

    def wait(self) -> float | None:
        return self.retry_after or None


class AnonymousRateLimitMiddleware:
    """AGENTSITE_RATE_ANON requests per address for /api/ requests that carry no credentials (no
    Authorization header, no logged-in browser session). After AuthenticationMiddleware."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/") and _anonymous(request):
            rate = rate_setting("AGENTSITE_RATE_ANON")
            if rate is not None:
                counted = hit("anon", request_address(request), rate)
                if counted.count > rate.count:
                    return rate_limited_response(ANON_REASON, counted.retry_after)
        return self.get_response(request)


def _anonymous(request: HttpRequest) -> bool:
    if settings.AGENTSITE_AUTH == "open" or request.META.get("HTTP_AUTHORIZATION"):
        return False  # open mode acts as the user `local`; a key is counted by key_authenticate
    user = getattr(request, "user", None)
    return not (user is not None and user.is_authenticated)


# --- socket frames -------------------------------------------------------------------------------------


class TokenBuckets:
    """Per-user token buckets in this process's memory: the rate of a user's counted socket frames
    (AGENTSITE_WS_RATE, bursts of AGENTSITE_WS_BURST; docs/protocol.md §6.6).

    In memory, not in the cache: a frame is checked on the socket's own path, and a dictionary lookup
    costs nothing next to a Redis round trip per frame. So each process counts its own sockets' frames;
    a user whose sockets land on k processes may send k times the rate, and what that could store is
    bounded by the queue caps, which hold across processes (chat/store.py). Bounded: beyond `kept`
    users, buckets that are full again (their users quiet for a while) are dropped; they start full.
    """

    def __init__(self, kept: int = 100_000) -> None:
        self.kept = kept
        self._buckets: dict[Any, list[float]] = {}  # who → [tokens, when last counted]

    def take(self, who: Any, rate: Rate, burst: int, *, now: float | None = None) -> float:
        """Count one event of `who`: 0 when it is allowed, else the seconds until one is (not counted)."""
        now = time.monotonic() if now is None else now
        per_second = rate.count / rate.seconds
        bucket = self._buckets.get(who)
        if bucket is None:
            if len(self._buckets) >= self.kept:
                self._drop_full(now, per_second, burst)
            bucket = self._buckets[who] = [float(burst), now]
        tokens = min(float(burst), bucket[0] + (now - bucket[1]) * per_second)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return 0.0
        bucket[0] = tokens
        return (1.0 - tokens) / per_second

    def _drop_full(self, now: float, per_second: float, burst: int) -> None:
        full = [
            who for who, (tokens, at) in self._buckets.items() if tokens + (now - at) * per_second >= burst
        ]
        for who in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[who]


FRAMES_REASON = "Too many messages and commands from this account"


def frame_allowed(buckets: TokenBuckets, user_id: int) -> int:
    """A counted socket frame of the user (message, steer, remove, cancel, confirmation_reply): 0 when it
    may go on, else the whole seconds until one may (docs/protocol.md §6.6)."""
    rate = rate_setting("AGENTSITE_WS_RATE")
    if rate is None:
        return 0
    wait = buckets.take(user_id, rate, settings.AGENTSITE_WS_BURST)
    return max(1, math.ceil(wait)) if wait else 0
