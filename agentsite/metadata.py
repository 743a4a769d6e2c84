"""What `OPTIONS` answers on the API."""

from __future__ import annotations

from typing import Any

from rest_framework.metadata import SimpleMetadata


class Metadata(SimpleMetadata):
    """The view's name, description and media types. DRF's default also describes the serializer of POST
    and PUT, and fails (500) on views whose bodies another model validates (pydantic, or a serializer the
    view picks itself); the OpenAPI document (`/api/v1/schema/`) describes every body."""

    def determine_actions(self, request: Any, view: Any) -> dict[str, Any]:
        return {}
