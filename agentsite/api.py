"""Account REST endpoints (API keys) and the unauthenticated version/health endpoints."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentsite import __version__
from agentsite.models import ApiKey, integer_pk
from agentsite.openapi import PAGE_PARAMETERS, errors, page_of
from agentsite.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeySerializer,
    KeyCreateSerializer,
    KeyRevokedSerializer,
    VersionSerializer,
)
from agentsite.services import api_key_create, api_key_revoke


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
        responses={201: ApiKeyCreatedSerializer},
    )
    def post(self, request: Request) -> Response:
        data = KeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key, secret = api_key_create(user=request.user, name=data.validated_data["name"])
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
