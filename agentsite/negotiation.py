"""Content negotiation for views that answer with their own bytes (an SSE stream, a workspace file)."""

from __future__ import annotations

from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation


class OwnBytesNegotiation(DefaultContentNegotiation):
    """The view's answer is not rendered (a StreamingHttpResponse with its own type), and its errors are
    JSON whatever the client accepts: a browser's EventSource sends `Accept: text/event-stream` and would
    otherwise get 406 from a JSON-only API."""

    def select_renderer(self, request: Any, renderers: list[Any], format_suffix: str | None = None) -> Any:
        renderer = renderers[0]
        return renderer, renderer.media_type
