"""`GET /api/v1/usage?days=N[&user=]`: model tokens per day and model (docs/protocol.md §6.4).

The caller's own usage; staff may name another user (`user=` id or username). `days` is 1–366 (default
30, today included, days in UTC)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentsite.errors import ApiError
from agentsite.openapi import errors
from agentsite.query import integer_pk, query_int
from agentsite.validation import invalid
from chat.usage import MAX_DAYS, usage_report

DEFAULT_DAYS = 30


def report_days(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_DAYS
    problem = f"Must be a whole number from 1 to {MAX_DAYS}."
    days = query_int(raw, "days", problem)
    if not 1 <= days <= MAX_DAYS:
        raise invalid({"days": [problem]})
    return days


def report_user(request: Request, raw: str | None) -> Any:
    """The user whose usage is asked for: the caller, or (staff only) the one named."""
    if not raw:
        return request.user
    if not request.user.is_staff:
        raise ApiError(403, "forbidden", "Only staff may see another user's usage.")
    users = get_user_model().objects
    pk = integer_pk(raw)
    user = users.filter(pk=pk).first() if pk is not None else users.filter(username=raw).first()
    if user is None:
        raise ApiError(404, "not_found", f"User {raw} not found.")
    return user


_ROW: dict[str, serializers.Field[Any, Any, Any, Any]] = {
    "day": serializers.DateField(),
    "model": serializers.CharField(),
    "prompt_tokens": serializers.IntegerField(),
    "completion_tokens": serializers.IntegerField(),
    "total_tokens": serializers.IntegerField(),
    "requests": serializers.IntegerField(),
}


class UsageApi(APIView):
    @extend_schema(
        operation_id="usage_report",
        parameters=[
            OpenApiParameter(
                "days",
                {"type": "integer", "minimum": 1, "maximum": MAX_DAYS},
                description=f"1–{MAX_DAYS} days back, today included (default 30)",
            ),
            OpenApiParameter("user", str, description="staff only: another user's id or username"),
        ],
        responses={
            200: inline_serializer(
                "UsageReport",
                {
                    "user": inline_serializer(
                        "UsageUser", {"id": serializers.IntegerField(), "username": serializers.CharField()}
                    ),
                    "days": serializers.IntegerField(),
                    "since": serializers.DateField(),
                    "results": inline_serializer("UsageRow", _ROW, many=True),
                    "total_tokens": serializers.IntegerField(),
                    "today_tokens": serializers.IntegerField(),
                    "daily_budget": serializers.IntegerField(allow_null=True),
                },
            ),
            **errors(
                {
                    400: "invalid: days is not a whole number from 1 to 366",
                    403: "forbidden: only staff may name another user",
                    404: "not_found: no such user",
                }
            ),
        },
    )
    def get(self, request: Request) -> Response:
        days = report_days(request.query_params.get("days"))
        user = report_user(request, request.query_params.get("user"))
        report = usage_report(user_id=user.pk, days=days)
        return Response({"user": {"id": user.pk, "username": user.get_username()}, **report})
