"""The site's error pages (handler404, handler500): JSON under /api/, else the page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agentsite.errors import json_error
from agentsite.middleware import not_found_response


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return not_found_response(request)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return json_error(500, "internal_error", "The server failed to handle this request.")
    return render(request, "500.html", status=500)
