"""File tools: list, read and write inside the session workspace.

Blocking file I/O runs in a worker thread so a large directory or file never stalls the
event loop that streams other sessions' tokens.
"""

from __future__ import annotations

import asyncio
import codecs
import difflib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agents.tools.base import Risk, Tool, ToolContext, ToolError, ToolParams
from agents.tools.quota import DiskQuota, QuotaExceeded, quota_of, refused
from agents.tools.workspace import (
    Entry,
    IsAFolder,
    NotAFile,
    NotAFolder,
    PathMissing,
    WorkspaceDir,
    list_folder,
    open_file,
)

MAX_LIST_ENTRIES = 500
MAX_READ_BYTES = 128 * 1024
MAX_WRITE_BYTES = 5 * 1024 * 1024
MAX_PREVIEW_CHARS = 20_000  # of the old text, the new text and the diff each, in a confirmation request
_BINARY_SNIFF_BYTES = 8192


class ListFilesParams(ToolParams):
    path: str = Field(default=".", description="Directory relative to the workspace; default: the workspace.")


class ListFilesTool(Tool):
    name = "list_files"
    description = (
        "List the entries of a directory in the workspace, sorted by name, with their type "
        "(file, directory, symlink) and size in bytes."
    )
    Params = ListFilesParams
    risk: Risk = "safe"

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, ListFilesParams)
        return await asyncio.to_thread(_list_directory, ctx.workspace, params.path)


def _list_directory(workspace: Path, path: str) -> str:
    try:
        shown, entries = list_folder(workspace, path)
    except PathMissing:
        raise ToolError(f"There is no directory '{path}' in the workspace.") from None
    except NotAFolder:
        raise ToolError(f"'{path}' is a file, not a directory; use read_file to read it.") from None
    except OSError as exc:
        raise ToolError(f"Could not list '{path}': {exc.strerror}.") from None
    if not entries:
        return f"'{shown}' is empty."
    entries.sort(key=lambda entry: entry.name)
    lines = [f"Contents of '{shown}' ({len(entries)} entries):"]
    lines += [_describe_entry(entry) for entry in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    return "\n".join(lines)


def _describe_entry(entry: Entry) -> str:
    """One line per entry; symlinks are not followed, so a link out of the workspace reveals nothing."""
    if entry.kind == "symlink":
        return f"symlink    {entry.name}"
    if entry.kind == "directory":
        return f"directory  {entry.name}/"
    if entry.kind == "file":
        return f"file       {entry.name} ({entry.size} bytes)"
    return f"other      {entry.name}"


class ReadFileParams(ToolParams):
    path: str = Field(description="File path relative to the workspace.", min_length=1)


class ReadFileTool(Tool):
    name = "read_file"
    description = (
        f"Read a UTF-8 text file from the workspace. Files larger than {MAX_READ_BYTES // 1024} KiB "
        "are truncated, with a note saying so."
    )
    Params = ReadFileParams
    risk: Risk = "safe"

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, ReadFileParams)
        return await asyncio.to_thread(_read_text, ctx.workspace, params.path)


def _read_text(workspace: Path, path: str) -> str:
    try:
        fd, shown = open_file(workspace, path)
    except PathMissing:
        raise ToolError(f"There is no file '{path}' in the workspace.") from None
    except IsAFolder:
        raise ToolError(f"'{path}' is a directory; use list_files to see its contents.") from None
    except OSError as exc:
        raise ToolError(f"Could not read '{path}': {exc.strerror}.") from None
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        data = handle.read(MAX_READ_BYTES)
    text = _decode_text(data, shown, complete=size <= len(data))
    if size > len(data):
        text += (
            f"\n[truncated: showing the first {len(data)} of {size} bytes of '{shown}'; "
            "use the shell tool (e.g. sed -n or tail) to read further]"
        )
    return text


def _decode_text(data: bytes, shown: str, *, complete: bool) -> str:
    """UTF-8 text, or a ToolError for binary content; a character cut by the size cap is dropped."""
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise ToolError(f"'{shown}' is a binary file; read_file only reads text.")
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(data, final=complete)
    except UnicodeDecodeError:
        raise ToolError(f"'{shown}' is not UTF-8 text; read_file only reads text.") from None


class WriteFileParams(ToolParams):
    path: str = Field(
        description="File path relative to the workspace; missing folders are created.", min_length=1
    )
    content: str = Field(description="The complete new content of the file (UTF-8 text).")


class WriteFileTool(Tool):
    name = "write_file"
    description = (
        "Create or overwrite a UTF-8 text file in the workspace with the given content; "
        "missing parent folders are created."
    )
    Params = WriteFileParams
    risk: Risk = "dangerous"

    def describe(self, params: BaseModel) -> str | None:
        assert isinstance(params, WriteFileParams)
        count = len(params.content)
        return f"write {count} character{'' if count == 1 else 's'} to {params.path}"

    def preview(self, params: BaseModel, workspace: Path) -> dict[str, Any] | None:
        """The content, and for an existing text file a unified diff against it (each part bounded)."""
        assert isinstance(params, WriteFileParams)
        try:
            old, exists = _old_text(workspace, params.path)
        except ToolError:
            return None  # the call fails when it runs; the arguments show what was asked
        shown: dict[str, Any] = {"kind": "diff", "path": params.path, "exists": exists}
        new_lines = params.content.splitlines(keepends=True)
        old_lines = old.splitlines(keepends=True) if old is not None else []
        diff = "".join(
            difflib.unified_diff(old_lines, new_lines, f"a/{params.path}", f"b/{params.path}", n=3)
        )
        shown["new"], cut_new = _bounded(params.content)
        shown["diff"], cut_diff = _bounded(diff)
        if old is not None:
            shown["old"], _ = _bounded(old)
        elif exists:
            shown["old_binary"] = True
        shown["truncated"] = cut_new or cut_diff
        return shown

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, WriteFileParams)
        data = params.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(f"The content is {len(data)} bytes; write_file takes at most {MAX_WRITE_BYTES}.")
        quota = await quota_of(ctx)
        try:
            shown = await asyncio.to_thread(_write_bytes, ctx.workspace, params.path, data, quota)
        except QuotaExceeded as exc:
            what = f"writing {len(data)} bytes to {params.path}"
            raise await refused(ctx, exc, tool=self.name, what=what) from None
        return f"Wrote {len(data)} bytes to '{shown}'."


def _write_bytes(workspace: Path, path: str, data: bytes, quota: DiskQuota | None = None) -> str:
    """Write `data` to the file at `path` (folders made as needed) within the quota; its shown path."""
    try:
        with WorkspaceDir(workspace) as walk:
            fd, shown, created = walk.open_for_writing(path)
            with os.fdopen(fd, "wb") as handle:
                freed = os.fstat(fd).st_blocks * 512
                try:
                    if quota is not None:
                        quota.check(len(data), freeing=freed)
                except QuotaExceeded:
                    if created:  # nothing is left behind by a refused write
                        os.unlink(shown.rpartition("/")[2], dir_fd=walk.fd)
                    raise
                handle.truncate(0)
                handle.write(data)
                handle.flush()
                if quota is not None:
                    quota.wrote(os.fstat(fd).st_blocks * 512 - freed)
    except IsAFolder:
        raise ToolError(f"'{path}' is a directory; give a file path.") from None
    except OSError as exc:
        raise ToolError(f"Could not write '{path}': {exc.strerror}.") from None
    return shown


def _old_text(workspace: Path, path: str) -> tuple[str | None, bool]:
    """The file's text as it is now (None: missing, not a file, binary or not UTF-8; read bounded), and
    whether a file is there. ToolError when the path is refused."""
    try:
        fd, shown = open_file(workspace, path)
    except (PathMissing, NotAFile, NotAFolder):
        return None, False
    except OSError:
        return None, False
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_READ_BYTES)
    try:
        return _decode_text(data, shown, complete=len(data) < MAX_READ_BYTES), True
    except ToolError:
        return None, True


def _bounded(text: str) -> tuple[str, bool]:
    return (text[:MAX_PREVIEW_CHARS], True) if len(text) > MAX_PREVIEW_CHARS else (text, False)
