"""The site's own endpoints: the unauthenticated version/health endpoints and the API's own description
(OpenAPI schema, Swagger UI: for logged-in users and API keys, unless AGENTSITE_PUBLIC_API_DOCS)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentsite import __version__


class VersionSerializer(serializers.Serializer[Any]):
    version = serializers.CharField()
    api = serializers.ChoiceField(choices=["v1"])


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


class _JsonErrors(APIView):
    """Errors of these YAML/HTML views answer in the API's JSON error shape."""

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = "application/json"
        return response


class SchemaApi(_JsonErrors, SpectacularAPIView):
    permission_classes = [ApiDocsAccess]


class DocsApi(_JsonErrors, SpectacularSwaggerSplitView):
    """Swagger UI with its start-up script as a file of its own (`?script`): no inline script (CSP)."""

    permission_classes = [ApiDocsAccess]
    url_name = "api:schema"

    # DRF's dispatch takes any HttpResponseBase here (finalize_response); the stubs say Response.
    def handle_exception(self, exc: Exception) -> HttpResponseBase:  # type: ignore[override]
        if isinstance(exc, exceptions.NotAuthenticated) and self.request.GET.get("script") is None:
            return redirect_to_login(self.request.get_full_path())  # a browser: log in, then come back
        return super().handle_exception(exc)
