"""The files of a session's workspace over REST (docs/protocol.md extensions "Workspace files").

The agent's tools write into the workspace; these endpoints let its owner see, download, upload and
delete what is there. Every path goes through the same confinement as the file tools
(agents/tools/workspace.py): no absolute paths, no `..` out, no symlink that leads outside. Another
user's session answers 404 exactly like a missing one (chat/services.py `session_get_for_user`).

A file is served with its type and `X-Content-Type-Options: nosniff` under a sandboxing
Content-Security-Policy, and only harmless types (raster images, plain text, JSON) inline: an HTML or
SVG file an agent wrote must never run as a page of this site.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import mimetypes
import os
import posixpath
import re
import shutil
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.sandbox.site import workspace_dir
from agents.tools.base import ToolError
from agents.tools.workspace import open_folder, open_inside, resolve_in_workspace
from agentsite.errors import ApiError
from agentsite.fields import query_flag, query_int
from agentsite.isotime import iso
from agentsite.negotiation import OwnBytesNegotiation
from agentsite.openapi import errors, flag_parameter
from chat.files_preview import preview
from chat.models import Session
from chat.serializers import (
    FileDeletedSerializer,
    FileEntrySerializer,
    FileListingSerializer,
    FilePreviewSerializer,
)
from chat.services import session_get_for_user, session_get_open_for_user

CHUNK = 64 * 1024
LIST_LIMIT, LIST_MAX = 200, 1000
_UNQUOTABLE = re.compile(r'[\x00-\x1f\x7f\\"]')
INLINE_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "text/plain", "application/json"}
)
FILE_CSP = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"


def _workspace(request: Request, session_id: str, *, write: bool = False) -> tuple[Session, Path]:
    getter = session_get_open_for_user if write else session_get_for_user
    session = getter(user=request.user, session_id=session_id)
    return session, workspace_dir(user_id=session.user_id, session_id=session.id)


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_path", message, fields={"path": [message]})


def _not_found(shown: str) -> ApiError:
    return ApiError(404, "not_found", f"There is no '{shown}' in the workspace.")


def _relative(raw: str) -> str:
    """The path as the client meant it, normalised; "." is the workspace itself."""
    if "\x00" in raw:
        raise _invalid("The path contains a NUL character.")
    if raw.startswith(("/", "~")):
        raise _invalid(f"The path '{raw}' is outside the workspace: use a path relative to it.")
    return posixpath.normpath(raw or ".")


def _resolve(workspace: Path, raw: str) -> Path:
    """Follow symlinks, but only to places inside the workspace (400 otherwise)."""
    try:
        return resolve_in_workspace(workspace, _relative(raw))
    except ToolError as exc:
        raise _invalid(str(exc)) from None


def _entry_location(workspace: Path, raw: str) -> Path:
    """The entry itself (a symlink stays a symlink): its folder resolved inside, its name as given."""
    relative = _relative(raw)
    if relative == ".":
        raise _invalid("The workspace itself cannot be replaced or deleted.")
    parent, name = posixpath.split(relative)
    return _resolve(workspace, parent or ".") / name


def _describe(workspace: Path, entry: Path, info: os.stat_result) -> dict[str, Any]:
    kind = "other"
    if stat.S_ISLNK(info.st_mode):
        kind = "symlink"
    elif stat.S_ISDIR(info.st_mode):
        kind = "directory"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    root = Path(os.path.realpath(workspace))
    return {
        "name": entry.name,
        "path": entry.relative_to(root).as_posix(),
        "type": kind,
        "size": info.st_size if kind == "file" else None,
        "modified_at": iso(dt.datetime.fromtimestamp(info.st_mtime, dt.UTC)),
    }


def _listing(workspace: Path, folder: Path) -> list[dict[str, Any]]:
    entries = []
    with os.scandir(folder) as found:
        for item in found:
            path = Path(item.path)
            entries.append(_describe(workspace, path, item.stat(follow_symlinks=False)))
    entries.sort(key=lambda e: (e["type"] != "directory", e["name"].lower(), e["name"]))
    return entries


def _page_params(request: Request) -> tuple[int, int]:
    message = f"limit must be 1-{LIST_MAX}; cursor a `next` you received."
    limit, cursor = request.query_params.get("limit"), request.query_params.get("cursor")
    limit_value = LIST_LIMIT if limit is None else query_int(limit, "limit", message)
    start = query_int(cursor, "cursor", message) if cursor else 0
    if not 1 <= limit_value <= LIST_MAX or start < 0:
        raise ApiError(400, "invalid", message)
    return limit_value, start


PATH_PARAM = OpenApiParameter("path", str, OpenApiParameter.QUERY, description="A folder; default: the root")
LIMIT_PARAM = OpenApiParameter(
    "limit", {"type": "integer", "minimum": 1, "maximum": LIST_MAX}, description=f"1-{LIST_MAX} (default 200)"
)
CURSOR_PARAM = OpenApiParameter("cursor", str, OpenApiParameter.QUERY, description="`next` of the last page")
NOT_FOUND = "not_found: no such session (or another user's), or no such file"
INVALID_PATH = "invalid_path: absolute, `..` out of the workspace, or a symlink out"
CLOSED = "session_closed: the session is closed"


class FileListApi(APIView):
    """`GET /chat/sessions/{id}/files?path=` → one folder, folders first, paginated."""

    @extend_schema(
        operation_id="chat_session_files_list",
        parameters=[PATH_PARAM, LIMIT_PARAM, CURSOR_PARAM],
        responses={
            200: FileListingSerializer,
            **errors(
                {
                    400: f"{INVALID_PATH}; not_a_directory; invalid: limit or cursor",
                    404: NOT_FOUND,
                }
            ),
        },
    )
    def get(self, request: Request, session_id: str) -> Response:
        _, workspace = _workspace(request, session_id)
        raw = request.query_params.get("path", ".")
        folder = _resolve(workspace, raw)
        if not folder.exists():
            raise _not_found(raw)
        if not folder.is_dir():
            raise ApiError(400, "not_a_directory", f"'{raw}' is a file, not a folder.")
        limit, start = _page_params(request)
        entries = _listing(workspace, folder)
        page = entries[start : start + limit]
        more = start + limit < len(entries)
        shown = folder.relative_to(Path(os.path.realpath(workspace))).as_posix()
        return Response({"path": shown, "results": page, "next": str(start + limit) if more else None})


class FileApi(APIView):
    """`GET|PUT|DELETE /chat/sessions/{id}/files/{path}`."""

    content_negotiation_class = OwnBytesNegotiation  # an <img> or a download asks for the file's own type

    @extend_schema(
        operation_id="chat_session_file_get",
        parameters=[
            flag_parameter("download", "As an attachment, whatever its type"),
            flag_parameter("preview", "A JSON preview instead of the bytes"),
        ],
        responses={
            # The bytes with the file's own type (a .json file's too); ?preview=1 the JSON preview.
            (200, "*/*"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The file, or ?preview=1 its preview"
            ),
            (200, "application/json"): OpenApiResponse(FilePreviewSerializer, description="?preview=1"),
            **errors({400: f"{INVALID_PATH}; not_a_file: a folder", 404: NOT_FOUND}),
        },
    )
    def get(self, request: Request, session_id: str, path: str) -> HttpResponseBase:
        _, workspace = _workspace(request, session_id)
        target = _resolve(workspace, path)
        if not target.exists():
            raise _not_found(path)
        if target.is_dir():
            raise ApiError(400, "not_a_file", f"'{path}' is a folder; list it with GET …/files?path=.")
        as_preview = query_flag(request.query_params.get("preview"), "preview")
        download = query_flag(request.query_params.get("download"), "download")
        fd = _open_inside(workspace, target, path)
        if as_preview:
            with os.fdopen(fd, "rb") as handle:
                return Response(preview(handle, name=target.name, path=_relative(path)))
        return _stream(fd, target.name, download=download)

    @extend_schema(
        operation_id="chat_session_file_put",
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={
            200: OpenApiResponse(
                FileEntrySerializer, description="An existing file (or symlink) was replaced"
            ),
            201: OpenApiResponse(FileEntrySerializer, description="A new file"),
            **errors(
                {
                    400: INVALID_PATH,
                    404: NOT_FOUND,
                    409: f"{CLOSED}; is_a_directory; conflict: a folder could not be created",
                    413: "too_large: over AGENTSITE_MAX_UPLOAD_BYTES",
                }
            ),
        },
    )
    def put(self, request: Request, session_id: str, path: str) -> Response:
        """The body is the file's bytes, as they are (any Content-Type); missing folders are created."""
        _, workspace = _workspace(request, session_id, write=True)
        entry = _entry_location(workspace, path)
        if entry.is_dir() and not entry.is_symlink():
            raise ApiError(409, "is_a_directory", f"'{path}' is a folder.")
        try:
            with open_folder(workspace, entry.parent, create=True) as folder:
                existed = _lexists(entry.name, folder)
                _receive(request, workspace, folder, entry.name)
                info = os.stat(entry.name, dir_fd=folder, follow_symlinks=False)
        except (OSError, ToolError) as exc:
            message = f"Could not write '{path}': {getattr(exc, 'strerror', None) or exc}."
            raise ApiError(409, "conflict", message) from None
        return Response(_describe(workspace, entry, info), status=200 if existed else 201)

    @extend_schema(
        operation_id="chat_session_file_delete",
        responses={
            200: FileDeletedSerializer,
            **errors(
                {400: f"{INVALID_PATH}; the workspace itself cannot be deleted", 404: NOT_FOUND, 409: CLOSED}
            ),
        },
    )
    def delete(self, request: Request, session_id: str, path: str) -> Response:
        """A file or symlink (never what it points at), or a folder with everything in it."""
        _, workspace = _workspace(request, session_id, write=True)
        entry = _entry_location(workspace, path)
        try:
            with open_folder(workspace, entry.parent) as folder:
                info = os.stat(entry.name, dir_fd=folder, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry.name, dir_fd=folder)
                else:
                    os.unlink(entry.name, dir_fd=folder)
        except (OSError, ToolError):
            raise _not_found(path) from None
        return Response({"path": _relative(path), "deleted": True})


def _open_inside(workspace: Path, target: Path, shown: str) -> int:
    """Open without following a symlink swapped in since the check (agents/tools/workspace.py)."""
    try:
        return open_inside(workspace, target)
    except OSError:
        raise _not_found(shown) from None
    except ToolError:
        raise _invalid(f"'{shown}' is not a file inside the workspace.") from None


def _lexists(name: str, folder: int) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _stream(fd: int, name: str, *, download: bool) -> StreamingHttpResponse:
    size = os.fstat(fd).st_size
    kind, _ = mimetypes.guess_type(name)
    kind = kind or "application/octet-stream"
    inline = kind in INLINE_TYPES and not download
    content_type = f"{kind}; charset=utf-8" if kind.startswith("text/") else kind
    response = StreamingHttpResponse(_chunks(fd), content_type=content_type)
    response["Content-Length"] = str(size)
    quoted = _UNQUOTABLE.sub("_", name)  # a header value holds no newline, quote or control character
    response["Content-Disposition"] = f'{"inline" if inline else "attachment"}; filename="{quoted}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = FILE_CSP
    response["Cache-Control"] = "no-store"
    return response


async def _chunks(fd: int) -> AsyncIterator[bytes]:
    """Read in a worker thread, chunk by chunk: a large file never sits in memory whole."""
    handle = os.fdopen(fd, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        handle.close()


def _receive(request: Request, workspace: Path, folder: int, name: str) -> None:
    """Stream the body into a new file beside the target in the open `folder`, then put it in place
    (a symlink there is replaced, never written through)."""
    limit = settings.AGENTSITE_MAX_UPLOAD_BYTES
    temporary = f".upload-{uuid.uuid4().hex}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(temporary, flags, 0o644, dir_fd=folder)
    written = 0
    try:
        with os.fdopen(fd, "wb") as handle:
            while chunk := request._request.read(CHUNK):
                written += len(chunk)
                if written > limit:
                    raise ApiError(413, "too_large", f"The file is larger than the limit of {limit} bytes.")
                handle.write(chunk)
            if os.geteuid() == 0:
                owner = os.stat(workspace)
                os.fchown(handle.fileno(), owner.st_uid, owner.st_gid)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder)
        raise
