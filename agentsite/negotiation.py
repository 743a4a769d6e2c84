"""Content negotiation for views that answer with their own bytes (an SSE stream, a workspace file)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer


class OwnBytesNegotiation(DefaultContentNegotiation):
    """The view's answer is not rendered (a StreamingHttpResponse with its own type), and its errors are
    JSON whatever the client accepts: a browser's EventSource sends `Accept: text/event-stream` and would
    otherwise get 406 from a JSON-only API."""

    def select_renderer(
        self, request: Any, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type
