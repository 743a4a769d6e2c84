"""Account REST endpoints (docs/protocol.md §1): the user's API keys and one-use WebSocket tickets."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import authenticated_by_key, request_credential, request_user
from accounts.models import ApiKey
from accounts.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeySerializer,
    KeyCreateSerializer,
    KeyRevokedSerializer,
    WsTicketSerializer,
)
from accounts.services import api_key_create, api_key_revoke
from accounts.tickets import ticket_issue
from agentsite.errors import ApiError
from agentsite.isotime import iso
from agentsite.openapi import PAGE_PARAMETERS, errors, page_of
from agentsite.query import integer_pk


class KeyListCreateApi(generics.GenericAPIView[ApiKey]):
    @extend_schema(
        operation_id="auth_keys_list", parameters=PAGE_PARAMETERS, responses=page_of(ApiKeySerializer)
    )
    def get(self, request: Request) -> Response:
        keys = ApiKey.objects.filter(user=request_user(request), revoked_at__isnull=True)
        page = self.paginate_queryset(keys)
        return self.get_paginated_response([key.to_dict() for key in page or []])

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
            user=request_user(request),
            name=data.validated_data["name"],
            expires_at=data.validated_data["expires_at"],
        )
        body: dict[str, Any] = {**key.to_dict(), "key": secret}
        return Response(body, status=201)


class KeyDetailApi(APIView):
    @extend_schema(
        operation_id="auth_keys_revoke",
        responses={200: KeyRevokedSerializer, **errors({404: "not_found: no such key of yours"})},
    )
    def delete(self, request: Request, key_id: str) -> Response:
        key = get_object_or_404(ApiKey, pk=integer_pk(key_id) or -1, user=request_user(request))
        api_key_revoke(key=key)
        return Response({"id": str(key.pk), "revoked": True})


class WsTicketApi(APIView):
    """docs/protocol.md §6.6: a one-use ticket for a WebSocket, so that no key travels in its URL."""

    @extend_schema(operation_id="auth_ws_ticket", request=None, responses={201: WsTicketSerializer})
    def post(self, request: Request) -> Response:
        ticket, expires_at = ticket_issue(request_credential(request))
        return Response({"ticket": ticket, "expires_at": iso(expires_at)}, status=201)
