"""REST authentication: `Authorization: Bearer <key>`, the browser session (with CSRF), and open mode.

A key that is given is always checked, in every mode: a wrong key fails the request instead of
falling through to the session or to open mode.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.credentials import Credential
from accounts.services import FAILED_KEYS_REASON, key_authenticate, local_user
from agentsite.errors import RateLimited
from security.ratelimit import request_address


def bearer_key(request: Request) -> str | None:
    header = authentication.get_authorization_header(request).decode("latin-1").strip()
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, str] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").strip()
        if not header:
            return None
        scheme, _, value = header.partition(" ")
        bearer = scheme.lower() == "bearer" and bool(value.strip())
        # A malformed header counts as a wrong key too (docs/protocol.md §6.2): guessing is guessing.
        attempt = key_authenticate(value.strip() if bearer else "", address=request_address(request))
        if attempt.retry_after:
            raise RateLimited(FAILED_KEYS_REASON, attempt.retry_after)
        if not bearer:
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <api_key>'.")
        if attempt.user is None:
            raise exceptions.AuthenticationFailed("Invalid, revoked or expired api_key.")
        return attempt.user, value.strip()

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def authenticated_by_key(request: Request) -> bool:
    return isinstance(request.successful_authenticator, ApiKeyAuthentication)


def request_user(request: Request) -> User:
    """The user of a request that a view's permissions let in (IsAuthenticated, the default): never
    anonymous there; typed as the `User` the services take."""
    user = request.user
    if not isinstance(user, User):
        raise exceptions.NotAuthenticated()
    return user


def request_credential(request: Request) -> Credential:
    """What an authenticated request authenticated with (a stream that outlives it follows it)."""
    user_id = request_user(request).pk
    if authenticated_by_key(request):
        return Credential.of_key(user_id, str(request.auth))
    if isinstance(request.successful_authenticator, CsrfSessionAuthentication):
        return Credential.of_session(user_id, request.session)
    return Credential(user_id)  # open mode's built-in user


class CsrfSessionAuthentication(authentication.SessionAuthentication):
    """Django's session, with CSRF enforced for unsafe methods (as DRF does)."""


class OpenModeAuthentication(authentication.BaseAuthentication):
    """AGENTSITE_AUTH=open (development only): anonymous requests act as the built-in user `local`."""

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        if settings.AGENTSITE_AUTH != "open":
            return None
        return local_user(), None


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """Describe our authenticators in the OpenAPI document (and keep `check --deploy` free of warnings)."""

    target_class = ApiKeyAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An API key: `ask_` + 40 characters."}


class CsrfSessionScheme(OpenApiAuthenticationExtension):
    target_class = CsrfSessionAuthentication
    name = "cookieAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": django_settings.SESSION_COOKIE_NAME}
