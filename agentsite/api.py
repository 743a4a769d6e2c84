"""Account REST endpoints (API keys), the unauthenticated version/health endpoints, and the API's own
description (OpenAPI schema, Swagger UI: for logged-in users and API keys, unless
AGENTSITE_PUBLIC_API_DOCS)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import exceptions, generics
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentsite import __version__
from agentsite.authentication import authenticated_by_key, request_credential
from agentsite.errors import ApiError
from agentsite.isotime import iso
from agentsite.models import ApiKey
from agentsite.openapi import PAGE_PARAMETERS, errors, page_of
from agentsite.query import integer_pk
from agentsite.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeySerializer,
    KeyCreateSerializer,
    KeyRevokedSerializer,
    VersionSerializer,
    WsTicketSerializer,
)
from agentsite.services import api_key_create, api_key_revoke
from agentsite.tickets import ticket_issue


class KeyListCreateApi(generics.GenericAPIView):
    @extend_schema(
        operation_id="auth_keys_list", parameters=PAGE_PARAMETERS, responses=page_of(ApiKeySerializer)
    )
    def get(self, request: Request) -> Response:
        keys = ApiKey.objects.filter(user=request.user, revoked_at__isnull=True)
        page = self.paginate_queryset(keys)
        return self.get_paginated_response([key.to_dict() for key in page])

    @extend_schema(
        operation_id="auth_keys_create",
        examples=[OpenApiExample("A key for a script", {"name": "backup script"}, request_only=True)],
        request=KeyCreateSerializer,
        responses={
            201: ApiKeyCreatedSerializer,
            **errors({403: "key_cannot_create_keys: a request authenticated by a key cannot make keys"}),
        },
    )
    def post(self, request: Request) -> Response:
        if authenticated_by_key(request):
            # A leaked key must not be able to outlive its revocation by minting others (§6.2).
            raise ApiError(
                403,
                "key_cannot_create_keys",
                "A request authenticated by an API key cannot create keys: create them in the portal (logged "
                "in) or with `manage.py create_api_key`.",
            )
        data = KeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key, secret = api_key_create(
            user=request.user, name=data.validated_data["name"], expires_at=data.validated_data["expires_at"]
        )
        body: dict[str, Any] = {**key.to_dict(), "key": secret}
        return Response(body, status=201)


class KeyDetailApi(APIView):
    @extend_schema(
        operation_id="auth_keys_revoke",
        responses={200: KeyRevokedSerializer, **errors({404: "not_found: no such key of yours"})},
    )
    def delete(self, request: Request, key_id: str) -> Response:
        key = get_object_or_404(ApiKey, pk=integer_pk(key_id) or -1, user=request.user)
        api_key_revoke(key=key)
        return Response({"id": str(key.pk), "revoked": True})


class WsTicketApi(APIView):
    """docs/protocol.md §6.6: a one-use ticket for a WebSocket, so that no key travels in its URL."""

    @extend_schema(operation_id="auth_ws_ticket", request=None, responses={201: WsTicketSerializer})
    def post(self, request: Request) -> Response:
        ticket, expires_at = ticket_issue(request_credential(request))
        return Response({"ticket": ticket, "expires_at": iso(expires_at)}, status=201)


class VersionApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(operation_id="version", responses=VersionSerializer)
    def get(self, request: Request) -> Response:
        return Response({"version": __version__, "api": "v1"})


def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    healthy = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # any driver error means "not healthy"
        checks["database"] = f"error: {exc.__class__.__name__}"
        healthy = False
    if settings.REDIS_URL:
        try:
            import redis

            client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
            client.ping()
            client.close()
            checks["redis"] = "ok"
        except Exception as exc:
            checks["redis"] = f"error: {exc.__class__.__name__}"
            healthy = False
    from agents.sandbox.site import get_sandbox

    return JsonResponse(
        {
            "status": "ok" if healthy else "unavailable",
            "checks": checks,
            # Where tools' commands run (docs/protocol.md §6.1): informative, never a reason for 503.
            "details": {"sandbox": get_sandbox().status()},
        },
        status=200 if healthy else 503,
    )


class ApiDocsAccess(BasePermission):
    """docs/protocol.md §6.5: the schema and its page need a login (session or key), unless
    AGENTSITE_PUBLIC_API_DOCS=true."""

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return settings.AGENTSITE_PUBLIC_API_DOCS or bool(user and user.is_authenticated)


class _JsonErrors:
    """Errors of these YAML/HTML views answer in the API's JSON error shape."""

    request: Request

    def handle_exception(self, exc: Exception) -> HttpResponseBase:
        response: HttpResponseBase = super().handle_exception(exc)  # type: ignore[misc]
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = "application/json"
        return response


class SchemaApi(_JsonErrors, SpectacularAPIView):
    permission_classes = [ApiDocsAccess]


class DocsApi(_JsonErrors, SpectacularSwaggerSplitView):
    """Swagger UI with its start-up script as a file of its own (`?script`): no inline script (CSP)."""

    permission_classes = [ApiDocsAccess]
    url_name = "api:schema"

    def handle_exception(self, exc: Exception) -> HttpResponseBase:
        if isinstance(exc, exceptions.NotAuthenticated) and self.request.GET.get("script") is None:
            return redirect_to_login(self.request.get_full_path())  # a browser: log in, then come back
        return super().handle_exception(exc)
