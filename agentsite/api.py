"""Account REST endpoints (API keys) and the unauthenticated version/health endpoints."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentsite import __version__
from agentsite.authentication import authenticated_by_key
from agentsite.errors import ApiError
from agentsite.fields import StrictCharField, StrictDateTimeField
from agentsite.models import ApiKey
from agentsite.services import api_key_create, api_key_revoke


class KeyListCreateApi(APIView):
    class InputSerializer(serializers.Serializer):
        name = StrictCharField(max_length=100, allow_blank=True, default="")
        expires_at = StrictDateTimeField(required=False, allow_null=True, default=None)

    def get(self, request: Request) -> Response:
        keys = ApiKey.objects.filter(user=request.user, revoked_at__isnull=True)
        return Response({"results": [key.to_dict() for key in keys], "next": None})

    def post(self, request: Request) -> Response:
        if authenticated_by_key(request):
            # A leaked key must not be able to outlive its revocation by minting others (§6.2).
            raise ApiError(
                403,
                "key_cannot_create_keys",
                "A request authenticated by an API key cannot create keys: create them in the portal (logged "
                "in) or with `manage.py create_api_key`.",
            )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key, secret = api_key_create(
            user=request.user, name=data.validated_data["name"], expires_at=data.validated_data["expires_at"]
        )
        body: dict[str, Any] = {**key.to_dict(), "key": secret}
        return Response(body, status=201)


class KeyDetailApi(APIView):
    def delete(self, request: Request, key_id: str) -> Response:
        key = get_object_or_404(ApiKey, pk=key_id if key_id.isdigit() else -1, user=request.user)
        api_key_revoke(key=key)
        return Response({"id": str(key.pk), "revoked": True})


class VersionApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

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
