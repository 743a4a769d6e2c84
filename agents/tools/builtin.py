"""The built-in tools of docs/protocol.md §2, and the clock tool that needs no module of its own."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from agents.tools.base import Risk, Tool, ToolContext, ToolError, ToolParams
from agents.tools.files import ListFilesTool, ReadFileTool, WriteFileTool
from agents.tools.shell import ShellTool


class CurrentTimeParams(ToolParams):
    timezone: str | None = Field(
        default=None, description="IANA time zone name such as 'Europe/Paris'; default UTC."
    )


class CurrentTimeTool(Tool):
    name = "get_current_time"
    description = "Get the current date and time, in UTC or in a given IANA time zone."
    Params = CurrentTimeParams
    risk: Risk = "safe"

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, CurrentTimeParams)
        zone_name = params.timezone or "UTC"
        now = datetime.now(UTC).astimezone(_zone(zone_name))
        return f"{now.isoformat(timespec='seconds')} ({now:%A}, {zone_name})"


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ToolError(
            f"Unknown time zone '{name}': use an IANA name such as 'UTC' or 'Europe/Paris'."
        ) from None


BUILTIN_TOOLS: tuple[Tool, ...] = (
    CurrentTimeTool(),
    ListFilesTool(),
    ReadFileTool(),
    WriteFileTool(),
    ShellTool(),
)
