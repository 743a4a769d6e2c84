"""`GET /api/v1/audit`: the audit trail for staff (docs/protocol.md §6.4), newest first, paginated like every
list, filtered by `user` (id or username), `action` (`config` matches every `config.*`), `since`, `until`,
`object_type` and `object_id`."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from agentsite.openapi import PAGE_PARAMETERS, errors
from agentsite.pagination import CursorPage
from agentsite.query import integer_pk
from agentsite.validation import invalid
from audit.models import AuditEntry


class IsStaff(BasePermission):
    message = "Only staff can read the audit trail."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_staff)


class AuditPage(CursorPage):
    ordering = ("-created_at", "-id")


def parse_instant(name: str, raw: str | None) -> dt.datetime | None:
    """An ISO 8601 time (`2026-01-02T03:04:05Z`; without an offset: UTC) or a date (its midnight, UTC)."""
    if raw is None or raw == "":
        return None
    value: dt.datetime | None = None
    try:
        value = parse_datetime(raw)
        if value is None and (day := parse_date(raw)) is not None:
            value = dt.datetime.combine(day, dt.time())
    except ValueError:
        value = None
    if value is None:
        raise invalid({name: ["Must be an ISO 8601 time (2026-01-02T03:04:05Z) or date."]})
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def audit_entries(params: Any) -> QuerySet[AuditEntry]:
    """The entries the query parameters ask for."""
    entries = AuditEntry.objects.all()
    user = params.get("user")
    if user:
        pk = integer_pk(user)
        entries = entries.filter(user_id=pk) if pk is not None else entries.filter(username=user)
    actions = [action.strip() for action in (params.get("action") or "").split(",") if action.strip()]
    if actions:
        matches = Q()
        for action in actions:
            matches |= Q(action=action) | Q(action__startswith=f"{action}.")
        entries = entries.filter(matches)
    since = parse_instant("since", params.get("since"))
    until = parse_instant("until", params.get("until"))
    if since is not None:
        entries = entries.filter(created_at__gte=since)
    if until is not None:
        entries = entries.filter(created_at__lt=until)
    for name in ("object_type", "object_id"):
        if params.get(name):
            entries = entries.filter(**{name: params[name]})
    return entries


_ENTRY = inline_serializer(
    "AuditEntry",
    {
        "id": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "user": inline_serializer(
            "AuditUser", {"id": serializers.CharField(), "username": serializers.CharField()}, allow_null=True
        ),
        "address": serializers.IPAddressField(allow_null=True),
        "action": serializers.CharField(),
        "object_type": serializers.CharField(),
        "object_id": serializers.CharField(),
        "summary": serializers.CharField(),
        "details": serializers.DictField(),
    },
    many=True,
)


class AuditListApi(generics.GenericAPIView[AuditEntry]):
    permission_classes = [IsAuthenticated, IsStaff]
    pagination_class = AuditPage

    @extend_schema(
        operation_id="audit_list",
        parameters=[
            OpenApiParameter("user", str, description="the acting user's id or username"),
            OpenApiParameter("action", str, description="comma-separated; `config` matches every `config.*`"),
            OpenApiParameter("since", str, description="ISO 8601 time or date: entries at or after it"),
            OpenApiParameter("until", str, description="ISO 8601 time or date: entries before it"),
            OpenApiParameter("object_type", str),
            OpenApiParameter("object_id", str),
            *PAGE_PARAMETERS,
        ],
        responses={
            200: inline_serializer(
                "AuditPage", {"results": _ENTRY, "next": serializers.CharField(allow_null=True)}
            ),
            **errors({403: "forbidden: only staff read the audit trail"}),
        },
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(audit_entries(request.query_params))
        return self.get_paginated_response([entry.to_dict() for entry in page or []])
