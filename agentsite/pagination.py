"""Cursor pagination with the contract's shape: {"results": [...], "next": "<cursor>"|null}."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from agentsite.query import query_int
from agentsite.validation import invalid


class CursorPage(CursorPagination):
    page_size = 50
    max_page_size = 500
    page_size_query_param = "limit"
    cursor_query_param = "cursor"
    ordering: str | tuple[str, ...] = "-created_at"

    def get_page_size(self, request: Any) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        problem = f"Must be an integer between 1 and {self.max_page_size}."
        value = query_int(raw, "limit", problem)
        if not 1 <= value <= self.max_page_size:
            raise invalid({"limit": [problem]})
        return value

    def decode_cursor(self, request: Any) -> Any:
        """A cursor that does not decode is bad input (400), not a missing resource (DRF's 404)."""
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise invalid({"cursor": ["Not a cursor of this list; pass a `next` you received."]}) from None

    def get_paginated_response(self, data: list[Any]) -> Response:
        return Response({"results": data, "next": self._cursor_of(self.get_next_link())})

    @staticmethod
    def _cursor_of(link: str | None) -> str | None:
        if not link:
            return None
        return parse_qs(urlparse(link).query).get("cursor", [None])[0]

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {"results": schema, "next": {"type": ["string", "null"]}},
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """`limit` and `cursor` as the OpenAPI document names them (agentsite/openapi.py PAGE_PARAMETERS)."""
        return [
            {
                "name": self.page_size_query_param,
                "in": "query",
                "required": False,
                "description": f"Items per page, 1-{self.max_page_size} (default {self.page_size}); "
                "anything else is 400 `invalid`.",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            },
            {
                "name": self.cursor_query_param,
                "in": "query",
                "required": False,
                "description": "The `next` of the previous page; one that does not decode is 400 `invalid`.",
                "schema": {"type": "string"},
            },
        ]
