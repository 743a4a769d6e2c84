"""WebSocket tickets (docs/protocol.md §6.6): keys never need to travel in URLs, where proxies and servers
log them. `POST /api/v1/auth/ws-ticket` gives a ticket (`wst_` + 43 url-safe characters) that opens one
socket with `?ticket=` within AGENTSITE_WS_TICKET_SECONDS (default 60), as the user and the credential that
asked for it: a socket opened with a ticket made by a key closes when that key is revoked, one made by a
browser session when that session ends (accounts/credentials.py).

A ticket lives in Django's cache under its hash, never in clear: Redis when REDIS_URL is set, so any
process redeems it, exactly once (the process whose delete removed it wins; a second redemption, or a
concurrent one, finds nothing). The redeeming handshake checks that the user is still active and the key
still valid; after that the socket follows its credential like any other, without a check per frame.
A ticket that is not one counts as a wrong key of its address (AGENTSITE_RATE_FAILED_KEYS).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import secrets
from dataclasses import asdict

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.utils import timezone

from accounts.credentials import Credential
from accounts.models import ApiKey
from accounts.services import KeyAttempt
from agentsite.db import select_row
from security.ratelimit import hit, peek, rate_setting

logger = logging.getLogger(__name__)

TICKET_PREFIX = "wst_"
TICKET_REFUSED = (
    "Invalid, used or expired ticket: ask for a new one (POST /api/v1/auth/ws-ticket), or use an api_key."
)


def _cache_key(ticket: str) -> str:
    return "ws-ticket:" + hashlib.sha256(ticket.encode()).hexdigest()


def ticket_issue(credential: Credential) -> tuple[str, dt.datetime]:
    """A new ticket for `credential` and when it expires."""
    seconds = int(settings.AGENTSITE_WS_TICKET_SECONDS)
    ticket = TICKET_PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + dt.timedelta(seconds=seconds)
    value = {**asdict(credential), "expires_at": expires_at.timestamp()}
    caches["default"].set(_cache_key(ticket), value, timeout=seconds)
    return ticket, expires_at


def _redeem(ticket: str) -> Credential | None:
    """The credential of a ticket, which is used up by this call; None for one that is not (any more)."""
    if not ticket.startswith(TICKET_PREFIX) or len(ticket) > 100:
        return None
    cache = caches["default"]
    key = _cache_key(ticket)
    try:
        value = cache.get(key)
        if value is None or not cache.delete(key):  # only one redemption deletes it
            return None
    except Exception as exc:  # the cache's own errors (Redis restarting): a ticket cannot be checked
        logger.warning("a WebSocket ticket could not be redeemed: the cache does not answer (%s)", exc)
        return None
    if value.pop("expires_at", 0) <= timezone.now().timestamp():
        return None
    return Credential(**value)


def ticket_authenticate(ticket: str, *, address: str) -> tuple[KeyAttempt, Credential | None]:
    """Redeem a ticket presented from `address`: its active user and credential, or none (a wrong, used or
    expired ticket, a user deactivated or a key revoked since; counted as a wrong key of the address, and
    past AGENTSITE_RATE_FAILED_KEYS not looked at: `retry_after` > 0)."""
    rate = rate_setting("AGENTSITE_RATE_FAILED_KEYS")
    if rate is not None:
        failed = peek("failed-key", address, rate)
        if failed.count >= rate.count:
            return KeyAttempt(None, failed.retry_after), None
    credential = _redeem(ticket)
    user = select_row(get_user_model(), id=credential.user_id) if credential is not None else None
    if credential is not None and credential.key_hash is not None:
        key = select_row(ApiKey, key_hash=credential.key_hash)
        if key is None or key.refusal(timezone.now()) is not None:
            user = None
    if user is None or not user.is_active:
        if rate is not None:
            hit("failed-key", address, rate)
        return KeyAttempt(None), None
    return KeyAttempt(user), credential
