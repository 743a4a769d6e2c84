"""WebSocket authentication: `?api_key=`, or the browser session cookie from an allowed Origin.

docs/protocol.md §1: a socket that sends an Origin must come from an allowed origin; API clients send none and
authenticate by key alone; cookie authentication is never accepted without an allowed Origin. A key
that is given is always checked: a wrong key is rejected in every mode, also AGENTSITE_AUTH=open.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.auth import AuthMiddlewareStack
from channels.middleware import BaseMiddleware
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import InterfaceError, OperationalError
from django.utils.http import is_same_domain

from agentsite.credentials import Credential
from agentsite.db import database_sync_to_async
from agentsite.internals import SERVER_SEND
from agentsite.services import api_key_authenticate, local_user


def origin_allowed(origin: str) -> bool:
    parsed = urlparse(origin)
    if not parsed.scheme or not parsed.hostname:
        return False
    if origin.rstrip("/") in settings.AGENTSITE_ALLOWED_ORIGINS:
        return True
    hosts = settings.ALLOWED_HOSTS or (["localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    hostname = parsed.hostname if ":" not in parsed.hostname else f"[{parsed.hostname}]"
    return any(pattern == "*" or is_same_domain(hostname, pattern) for pattern in hosts)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


class WebSocketAuthMiddleware:
    """Outermost: the Origin rule, then `?api_key=` alone, or the browser's session cookie.

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
        if origin is not None and not origin_allowed(origin):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        # `credential`: what the socket authenticated with (agentsite/credentials.py closes it when that ends)
        scope = {**scope, "auth_error": None, "credential": None, SERVER_SEND: send}
        api_keys = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("api_key")
        if api_keys is None:
            return await self.cookie_stack(scope, receive, send)
        try:
            user = await database_sync_to_async(api_key_authenticate)(api_keys[0])
        except (OperationalError, InterfaceError):
            scope["user"] = AnonymousUser()
            scope["unavailable"] = True  # the consumer says so (close 1012) instead of dropping the handshake
            return await self.inner(scope, receive, send)
        if user is None:
            scope["user"] = AnonymousUser()
            scope["auth_error"] = "Invalid, revoked or expired api_key."
        else:
            scope["user"] = user
            scope["credential"] = Credential.of_key(user.pk, api_keys[0])
        return await self.inner(scope, receive, send)


class CookieUserMiddleware(BaseMiddleware):
    """Inside Channels' AuthMiddlewareStack: the session cookie's user, only with an allowed Origin."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        cookie_user = scope.get("user")
        authenticated = False
        if _header(scope, b"origin") is not None and cookie_user is not None:
            authenticated = await database_sync_to_async(lambda: cookie_user.is_authenticated)()
        scope = dict(scope)
        if authenticated and cookie_user is not None:
            scope["user"] = cookie_user
            scope["credential"] = Credential(cookie_user.pk, session_key=scope["session"].session_key)
        elif settings.AGENTSITE_AUTH == "open":
            scope["user"] = await database_sync_to_async(local_user)()
            scope["credential"] = Credential(scope["user"].pk)
        else:
            scope["user"] = AnonymousUser()
            scope["auth_error"] = "Authentication required: pass ?api_key=<key> or log in."
        return await super().__call__(scope, receive, send)


def WebSocketAuthStack(inner: Any) -> Any:
    return WebSocketAuthMiddleware(inner)
