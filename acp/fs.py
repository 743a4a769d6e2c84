"""`fs/read_text_file` and `fs/write_text_file` for runners, served inside the workspace only.

A runner runs with the workspace as its cwd and speaks in absolute paths; `confine_path` maps them
onto the same confinement rule the file tools use. Anything outside becomes a JSON-RPC error that
the runner sees, never a read or write.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from acp.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError
from acp.policy import confine_path
from acp.schema import ReadTextFileResponse, WriteTextFileResponse
from agents.tools.base import ToolError
from agents.tools.workspace import PathMissing, open_file, write_file

NOT_FOUND = -32002  # ACP's "resource not found"


async def read_text_file(
    workspace: Path,
    path: str,
    *,
    line: int | None = None,
    limit: int | None = None,
    visible: str | None = None,
) -> ReadTextFileResponse:
    """The text of a workspace file, optionally from 1-based `line` for at most `limit` lines.
    `visible`: where the runner sees the workspace (its absolute paths start there)."""
    target = _confined(workspace, path, visible)
    try:
        text = await asyncio.to_thread(_read_text, workspace, target)
    except (FileNotFoundError, PathMissing):
        raise JsonRpcError(NOT_FOUND, f"The file '{path}' does not exist.", {"path": path}) from None
    except (OSError, UnicodeDecodeError, ToolError) as exc:
        message = f"The file '{path}' cannot be read as text: {exc}"
        raise JsonRpcError(INTERNAL_ERROR, message, {"path": path}) from None
    return ReadTextFileResponse(content=_slice_lines(text, line, limit))


async def write_text_file(
    workspace: Path, path: str, content: str, *, visible: str | None = None
) -> WriteTextFileResponse:
    """Write a workspace file, creating its folders (which the confinement keeps inside too)."""
    target = _confined(workspace, path, visible)
    try:
        await asyncio.to_thread(_write_text, workspace, target, content)
    except (OSError, ToolError) as exc:
        message = f"The file '{path}' cannot be written: {exc}"
        raise JsonRpcError(INTERNAL_ERROR, message, {"path": path}) from None
    return WriteTextFileResponse()


def _confined(workspace: Path, path: str, visible: str | None) -> Path:
    try:
        return confine_path(workspace, path, visible=visible)
    except ToolError as exc:
        raise JsonRpcError(INVALID_PARAMS, str(exc), {"path": path}) from None


def _slice_lines(text: str, line: int | None, limit: int | None) -> str:
    """ACP's optional window: start at 1-based `line`, return at most `limit` lines."""
    if line is None and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = max((line or 1) - 1, 0)
    end = start + limit if limit is not None else None
    return "".join(lines[start:end])


def _read_text(workspace: Path, target: Path) -> str:
    """Read by a walk from the workspace's handle (agents/tools/workspace.py), never by the checked path."""
    fd, _ = open_file(workspace, _inside(workspace, target))
    with open(fd, encoding="utf-8") as handle:
        return handle.read()


def _write_text(workspace: Path, target: Path, content: str) -> None:
    write_file(workspace, _inside(workspace, target), content.encode("utf-8"))


def _inside(workspace: Path, target: Path) -> str:
    """The checked path as a path from the workspace's root, for the walk."""
    return target.relative_to(os.path.realpath(workspace)).as_posix()
