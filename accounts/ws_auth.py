"""WebSocket authentication: `Authorization: Bearer <key>` on the upgrade request, `?ticket=` (a one-use
ticket, accounts/tickets.py), `?api_key=`, or the browser session cookie from an allowed Origin.

docs/protocol.md §1, §6.6: a socket that sends an Origin must come from an allowed origin; API clients send
none and authenticate by key alone; cookie authentication is never accepted without an allowed Origin. A key
or ticket that is given is always checked: a wrong one is rejected in every mode, also AGENTSITE_AUTH=open,
and never falls back to another credential. An `Authorization` header of another scheme (`Basic`, from a
proxy that asks browsers for a password) is not ours: the cookie decides. Tickets and the header are
preferred: a key in the URL lands in proxies' and servers' access logs.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from channels.auth import AuthMiddlewareStack
from channels.middleware import BaseMiddleware
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import InterfaceError, OperationalError
from django.http.request import split_domain_port, validate_host

from accounts.credentials import Credential
from accounts.services import FAILED_KEYS_REASON, key_authenticate, local_user
from accounts.tickets import TICKET_REFUSED, ticket_authenticate
from agentsite.db import database_sync_to_async
from agentsite.errors import rate_limited_message
from agentsite.stack import SERVER_SEND
from security.ratelimit import scope_address

_DEFAULT_PORTS = {"http": "80", "https": "443"}
AUTH_REQUIRED = (
    "Authentication required: send 'Authorization: Bearer <api_key>', pass ?ticket= "
    "(POST /api/v1/auth/ws-ticket) or ?api_key=<key>, or log in."
)


def _origin(scheme: str, netloc: str) -> str:
    """`scheme://host[:port]`, lower case, without the scheme's default port."""
    host, port = split_domain_port(netloc)
    if not host:
        return ""
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if port and port != _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


def _own_origin(scope: dict[str, Any]) -> str | None:
    """The origin a browser on this server's own pages sends: the scheme (wss: https; behind a proxy
    SECURE_PROXY_SSL_HEADER, as Django reads it) and the Host the socket was opened to, when that
    Host is allowed (ALLOWED_HOSTS, as Django's get_host())."""
    host = _header(scope, b"host")
    if settings.USE_X_FORWARDED_HOST:
        host = _header(scope, b"x-forwarded-host") or host
    if not host:
        return None
    allowed = settings.ALLOWED_HOSTS or ([".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, allowed):
        return None
    secure = scope.get("scheme") in {"wss", "https"}
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        name, value = proxy_header
        header = name.lower().removeprefix("http_").replace("_", "-").encode("latin-1")
        secure = secure or _header(scope, header) == value
    return _origin("https" if secure else "http", host)


def origin_allowed(origin: str, scope: dict[str, Any]) -> bool:
    """docs/protocol.md §1, §6.5: an Origin must match in scheme, host and port — this server's own
    origin, or one of AGENTSITE_ALLOWED_ORIGINS (`https://*.example.com` allows its subdomains on that
    scheme and port)."""
    parsed = urlsplit(origin.strip())
    if parsed.scheme not in _DEFAULT_PORTS or not parsed.netloc or parsed.path not in {"", "/"}:
        return False
    wanted = _origin(parsed.scheme, parsed.netloc)
    if not wanted:
        return False
    if wanted == _own_origin(scope):
        return True
    return any(_matches(allowed.strip(), wanted) for allowed in settings.AGENTSITE_ALLOWED_ORIGINS)


def _matches(allowed: str, origin: str) -> bool:
    """An entry of AGENTSITE_ALLOWED_ORIGINS against a normalised origin; `*.example.com` matches
    example.com and its subdomains (as Django's CSRF_TRUSTED_ORIGINS do), on the same scheme and port."""
    entry = urlsplit(allowed)
    if not entry.scheme or not entry.netloc:
        return False
    if "*" not in entry.netloc:
        return _origin(entry.scheme, entry.netloc) == origin
    scheme, _, netloc = origin.partition("://")
    if scheme != entry.scheme:
        return False
    pattern_host, _, pattern_port = entry.netloc.lower().partition(":")  # a name, never an IPv6 address
    host, port = split_domain_port(netloc)
    default = _DEFAULT_PORTS.get(scheme, "")
    if (port or default) != (pattern_port or default) or not pattern_host.startswith("*."):
        return False
    suffix = pattern_host[1:]  # ".example.com"
    return host == suffix[1:] or host.endswith(suffix)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def _bearer(scope: dict[str, Any]) -> str | None:
    """The key of an `Authorization: Bearer <key>` header (empty when the header names none), else None."""
    header = _header(scope, b"authorization")
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


class WebSocketAuthMiddleware:
    """Outermost: the Origin rule, then a Bearer header, a ticket or `?api_key=` alone, or the browser's
    session cookie.

    A key-authenticated socket skips Channels' cookie, session and user middlewares entirely: it has no
    use for them, and each of them costs memory per socket and a wrapper around every frame it sends.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cookie_stack = AuthMiddlewareStack(CookieUserMiddleware(inner))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            return await self.inner(scope, receive, send)
        origin = _header(scope, b"origin")
        if origin is not None and not origin_allowed(origin, scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        # `credential`: what the socket authenticated with (accounts/credentials.py closes it when that ends)
        scope = {**scope, "auth_error": None, "credential": None, SERVER_SEND: send}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        key = _bearer(scope)
        if key is None and "ticket" not in query:
            key = (query.get("api_key") or [None])[0]
        if key is None and "ticket" not in query:
            return await self.cookie_stack(scope, receive, send)
        address = scope_address(scope)
        try:
            if key is not None:
                attempt = await database_sync_to_async(key_authenticate)(key, address=address)
                credential = Credential.of_key(attempt.user.pk, key) if attempt.user is not None else None
                refused = "Invalid, revoked or expired api_key."
            else:
                attempt, credential = await database_sync_to_async(ticket_authenticate)(
                    query["ticket"][0], address=address
                )
                refused = TICKET_REFUSED
        except (OperationalError, InterfaceError):
            scope["user"] = AnonymousUser()
            scope["unavailable"] = True  # the consumer says so (close 1012) instead of dropping the handshake
            return await self.inner(scope, receive, send)
        if attempt.user is None:
            scope["user"] = AnonymousUser()
            scope["auth_error"] = refused
            if attempt.retry_after:  # too many wrong keys from this address (docs/protocol.md §6.2)
                scope["rate_limited"] = rate_limited_message(FAILED_KEYS_REASON, attempt.retry_after)
        else:
            scope["user"] = attempt.user
            scope["credential"] = credential
        return await self.inner(scope, receive, send)


class CookieUserMiddleware(BaseMiddleware):
    """Inside Channels' AuthMiddlewareStack: the session cookie's user, only with an allowed Origin."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        cookie_user = scope.get("user")
        credential = None
        if _header(scope, b"origin") is not None and cookie_user is not None:
            credential = await database_sync_to_async(_session_credential)(cookie_user, scope["session"])
        scope = dict(scope)
        if credential is not None:
            scope["user"] = cookie_user
            scope["credential"] = credential
        elif settings.AGENTSITE_AUTH == "open":
            scope["user"] = await database_sync_to_async(local_user)()
            scope["credential"] = Credential(scope["user"].pk)
        else:
            scope["user"] = AnonymousUser()
            scope["auth_error"] = AUTH_REQUIRED
        return await super().__call__(scope, receive, send)


def _session_credential(user: Any, session: Any) -> Credential | None:
    """The browser session's credential if its lazy user is logged in (both load in the database thread)."""
    return Credential.of_session(user.pk, session) if user.is_authenticated else None


def WebSocketAuthStack(inner: Any) -> Any:
    return WebSocketAuthMiddleware(inner)
