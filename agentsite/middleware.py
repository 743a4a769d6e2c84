"""Refuse oversized request bodies up front with 413, answer 503 when the database does not answer
(instead of a 500 page), in the API's error shape under /api/; the Permissions-Policy header; the
portal's own 404 page for a view's Http404 in development too."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.deprecation import MiddlewareMixin

from agentsite.errors import json_error

# Uploads into a workspace have their own limit, and their view reads the body as a stream.
_UPLOAD = re.compile(r"^/api/v1/chat/sessions/[^/]+/files/")


class BodySizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = request.META.get("CONTENT_LENGTH")
        upload = request.method == "PUT" and bool(_UPLOAD.match(request.path))
        limit = settings.AGENTSITE_MAX_UPLOAD_BYTES if upload else settings.AGENTSITE_MAX_BODY_BYTES
        if length:
            try:
                too_large = int(length) > limit
            except ValueError:
                return json_error(400, "invalid", "Content-Length is not a number.")
            if too_large:
                return json_error(
                    413,
                    "too_large",
                    f"The request body ({length} bytes) is larger than the limit of {limit} bytes.",
                )
        elif request.method in {"POST", "PUT", "PATCH"} and not upload:
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


class DatabaseUnavailableMiddleware:
    """A view that finds the database gone (restarting, failing over) answers 503 `unavailable` at once."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        message = "The database does not answer; try again in a moment."
        if request.path.startswith("/api/"):
            return json_error(503, "unavailable", message)
        return HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")


class PermissionsPolicyMiddleware(MiddlewareMixin):
    """`Permissions-Policy: AGENTSITE_PERMISSIONS_POLICY` on every response (docs/protocol.md §6.5): no
    page of ours uses the camera, the microphone, the location and the like, so none may."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if settings.AGENTSITE_PERMISSIONS_POLICY:
            response.headers.setdefault("Permissions-Policy", settings.AGENTSITE_PERMISSIONS_POLICY)
        return response


class OwnNotFoundPageMiddleware:
    """A view's Http404 (another user's chat, an unknown agent) answers with the portal's own 404 page
    whatever DEBUG says: with DEBUG on, Django would show its technical
    page, listing every URL pattern. (An address no pattern matches still gets that page in development.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return not_found_response(request) if isinstance(exception, Http404) else None


def not_found_response(request: HttpRequest) -> HttpResponse:
    """The one 404 of the site (also handler404, agentsite/views.py): JSON under /api/, else the page."""
    if request.path.startswith("/api/"):
        return json_error(404, "not_found", "Not found.")
    return render(request, "404.html", status=404)
