"""Tools the agents can call: the API (``base``), the built-ins, and the default registry."""

from __future__ import annotations

from agents.tools.base import (
    Risk,
    Tool,
    ToolContext,
    ToolError,
    ToolParams,
    ToolRegistry,
    json_schema_for,
)
from agents.tools.builtin import BUILTIN_TOOLS
from agents.tools.workspace import resolve_in_workspace

registry = ToolRegistry()
for _tool in BUILTIN_TOOLS:
    registry.register(_tool)

__all__ = [
    "BUILTIN_TOOLS",
    "Risk",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolParams",
    "ToolRegistry",
    "json_schema_for",
    "registry",
    "resolve_in_workspace",
]
