"""The REST edge's one translation of errors into the API's shape: {"error": {"code", "message", "fields"?}}.

Domain errors (agentsite/exceptions.py) raised anywhere under a view answer with their own status and
code; DRF's own errors (validation, authentication, parsing) are reshaped to the same form."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from agentsite.exceptions import DomainError, ServiceUnavailable
from agentsite.validation import drf_fields, summary

logger = logging.getLogger(__name__)


class ApiError(DomainError):
    """An error a view names itself, with its status: ApiError(409, "protected", "...")."""

    def __init__(self, status_code: int, code: str, message: str, *, fields: dict[str, Any] | None = None):
        super().__init__(message, code=code, status=status_code, fields=fields)


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def json_error(status_code: int, code: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status_code)


def wait_text(seconds: int) -> str:
    """How long to wait, rounded up: "45 seconds", "1 minute", "15 minutes"."""
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def rate_limited_message(reason: str, retry_after: int) -> str:
    return f"{reason} Try again in {wait_text(retry_after)}."


def rate_limited_response(reason: str, retry_after: int) -> JsonResponse:
    """429 `rate_limited` with Retry-After, for edges outside DRF (middleware)."""
    response = json_error(429, "rate_limited", rate_limited_message(reason, retry_after))
    response["Retry-After"] = str(retry_after)
    return response


class RateLimited(exceptions.Throttled):
    """429 `rate_limited` with Retry-After and a reason of our own (DRF's Throttled words its own)."""

    def __init__(self, reason: str, retry_after: int):
        exceptions.APIException.__init__(self, rate_limited_message(reason, retry_after))
        self.wait = retry_after


_CODES = {
    status.HTTP_401_UNAUTHORIZED: "unauthorized",
    status.HTTP_403_FORBIDDEN: "forbidden",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_406_NOT_ACCEPTABLE: "not_acceptable",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_429_TOO_MANY_REQUESTS: "rate_limited",
}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # Imported here: DRF's views module loads the authentication classes, which import this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("too_large", "The request body is larger than the server accepts."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database does not answer (restarting, failing over): a clear 503 instead of a 500 page.
        exc = ServiceUnavailable("The database does not answer; try again in a moment.")
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) if str(exc) else "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = drf_fields(exc.detail)
        response.data = error_body("invalid", summary(fields), fields)
        return response
    if isinstance(exc, exceptions.ParseError):
        response.data = error_body("invalid_json", f"The request body is not valid JSON: {exc.detail}")
        return response
    if isinstance(exc, exceptions.Throttled):  # a DRF throttle (security/ratelimit.py) or RateLimited
        wait = max(1, math.ceil(getattr(exc, "wait", None) or 1))  # set in __init__, not in the stubs
        message = (
            str(exc.detail)
            if isinstance(exc, RateLimited)
            else rate_limited_message("Too many requests for this account.", wait)
        )
        response.data = error_body("rate_limited", message)
        response["Retry-After"] = str(wait)
        return response
    code = _CODES.get(response.status_code, "error")
    detail = getattr(exc, "detail", None)
    message = str(detail) if isinstance(detail, str) else "Request failed."
    if response.status_code == status.HTTP_401_UNAUTHORIZED and "credentials were not provided" in message:
        message = "Authentication required: send 'Authorization: Bearer <api_key>' or log in."
    response.data = error_body(code, message)
    return response
