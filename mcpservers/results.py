"""An MCP tool result as the tool result the model reads (docs/protocol.md §2 "MCP servers").

- text content is the output; a resource's text too, under its URI;
- images (and audio, and binary resources) become files in the chat session's workspace, where the
  portal's Files panel shows them; the model reads where each one was saved;
- structured content is shown as JSON when the server sent no text;
- a result marked `isError` is a ToolError: the model reads it as `is_error: true` and the turn goes on.
The whole text is capped like a command's output (head and tail kept, agents/sandbox/process.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import mcp_types as types

from agents.sandbox.process import OutputBuffer
from agents.tools.base import ToolContext, ToolError
from agents.tools.quota import QuotaExceeded, quota_of, refused
from agents.tools.workspace import WorkspaceDir

FILES_FOLDER = "mcp-files"
MAX_FILE_BYTES = 20 * 1024 * 1024
EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/avif": "avif",
    "image/svg+xml": "svg",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "application/pdf": "pdf",
    "application/json": "json",
    "text/plain": "txt",
}


async def result_text(result: types.CallToolResult, *, server: str, tool: str, ctx: ToolContext) -> str:
    """The text the model reads; ToolError when the server marked the result an error."""
    parts = [await _part(block, server=server, tool=tool, ctx=ctx) for block in result.content]
    text = "\n".join(part for part in parts if part)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    text = _capped(text)
    if result.is_error:
        raise ToolError(
            f"MCP server '{server}' reported an error from its tool '{tool}': {text or '(no message)'}"
        )
    return text or "(no output)"


async def _part(block: types.ContentBlock, *, server: str, tool: str, ctx: ToolContext) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return await _saved(block.data, block.mime_type, kind, server=server, tool=tool, ctx=ctx)
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        saved = await _saved(
            resource.blob, resource.mime_type or "", "resource", server=server, tool=tool, ctx=ctx
        )
        return f"{saved} (resource {resource.uri})"
    if isinstance(block, types.ResourceLink):
        return f"[resource link: {block.uri}" + (f" ({block.name})" if block.name else "") + "]"
    return f"[{getattr(block, 'type', 'unknown')} content, not shown]"


async def _saved(data: str, mime_type: str, kind: str, *, server: str, tool: str, ctx: ToolContext) -> str:
    """Decode base64 `data` into a new workspace file (within the disk quotas, agents/tools/quota.py); the
    line the model reads about it."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{kind} from the server left out: its data is not valid base64]"
    if len(raw) > MAX_FILE_BYTES:
        return f"[{kind} of {len(raw)} bytes left out: the limit is {MAX_FILE_BYTES} bytes]"
    quota = await quota_of(ctx)
    if quota is not None:
        try:
            await asyncio.to_thread(quota.check, len(raw))
        except QuotaExceeded as exc:
            await refused(ctx, exc, tool=f"{server}/{tool}", what=f"saving a {kind} of {len(raw)} bytes")
            return f"[{kind} of {len(raw)} bytes left out: {exc}]"
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    extension = EXTENSIONS.get(mime_type.split(";")[0].strip().lower(), "bin")
    relative = f"{FILES_FOLDER}/{server}/{_safe(tool)}-{stamp}-{uuid.uuid4().hex[:6]}.{extension}"
    shown = await asyncio.to_thread(_write, ctx.workspace, relative, raw)
    if quota is not None:
        quota.wrote(len(raw))
    return f"[{kind} saved in the workspace as {shown} ({mime_type or 'unknown type'}, {len(raw)} bytes)]"


def _write(workspace: Path, relative: str, data: bytes) -> str:
    """A new file, reached from the workspace's handle (agents/tools/workspace.py); its shown path."""
    with WorkspaceDir(workspace) as walk:
        name = walk.parent_of(relative, create=True)
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=walk.fd
        )
        walk.give(name)
        shown = f"{walk.shown()}/{name}"
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return shown


def _safe(name: str) -> str:
    """A tool name as a file name: what is not a letter, digit, '-' or '_' becomes '_'."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in name)[:64] or "tool"


def _capped(text: str) -> str:
    buffer = OutputBuffer()
    buffer.feed(text.encode("utf-8"))
    return buffer.text()
