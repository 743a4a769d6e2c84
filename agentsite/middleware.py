"""Refuse oversized request bodies up front with 413 and the API's error shape."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse

from agentsite.errors import json_error


class BodySizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = request.META.get("CONTENT_LENGTH")
        if length:
            try:
                too_large = int(length) > settings.AGENTSITE_MAX_BODY_BYTES
            except ValueError:
                return json_error(400, "invalid", "Content-Length is not a number.")
            if too_large:
                return json_error(
                    413,
                    "too_large",
                    f"The request body ({length} bytes) is larger than the limit of "
                    f"{settings.AGENTSITE_MAX_BODY_BYTES} bytes.",
                )
        elif request.method in {"POST", "PUT", "PATCH"}:
            # No Content-Length (chunked): read the body here, where Django enforces the size limit.
            try:
                too_large = len(request.body) > settings.AGENTSITE_MAX_BODY_BYTES
            except RequestDataTooBig:
                too_large = True
            if too_large:
                return json_error(
                    413,
                    "too_large",
                    f"The request body is larger than {settings.AGENTSITE_MAX_BODY_BYTES} bytes.",
                )
        return self.get_response(request)
