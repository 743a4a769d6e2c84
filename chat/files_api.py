"""The files of a session's workspace over REST (docs/protocol.md extensions "Workspace files").

The agent's tools write into the workspace; these endpoints let its owner see, download, upload and
delete what is there. Every path is walked from the workspace's open handle like the file tools' paths
(agents/tools/workspace.py): no absolute paths, no `..` out, no symlink followed out, also when a command
swaps a folder for one meanwhile. Uploads count against the disk quotas (agents/tools/quota.py). Another
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
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import request_user
from agents.sandbox.site import workspace_dir
from agents.tools.quota import DiskQuota, QuotaExceeded, exceeded, usage
from agents.tools.workspace import (
    Entry,
    IsAFolder,
    NotAFile,
    NotAFolder,
    PathMissing,
    PathOutside,
    WorkspaceDir,
    list_folder,
    open_file,
    parent_folder,
)
from agentsite.errors import ApiError
from agentsite.isotime import iso
from agentsite.negotiation import OwnBytesNegotiation
from agentsite.openapi import errors, flag_parameter
from agentsite.query import query_flag, query_int
from agentsite.validation import invalid
from audit.actions import QUOTA_EXCEEDED
from audit.services import audit_record
from chat.files_preview import preview
from chat.models import Session
from chat.quota import workspace_quota
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
    session = getter(user=request_user(request), session_id=session_id)
    return session, workspace_dir(user_id=session.user_id, session_id=session.id)


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_path", message, fields={"path": [message]})


def _not_found(shown: str) -> ApiError:
    return ApiError(404, "not_found", f"There is no '{shown}' in the workspace.")


def _relative(raw: str) -> str:
    """The path as the client meant it, normalised; "." is the workspace itself."""
    return posixpath.normpath(raw or ".")


@contextlib.contextmanager
def _refusals(
    shown: str, *, missing: type[Exception] | tuple[type[Exception], ...] = PathMissing
) -> Iterator[None]:
    """The walk's refusals as REST errors: 400 out of the workspace, 404 nothing there, 409 anything the
    file system refused otherwise (never a 500)."""
    try:
        yield
    except PathOutside as exc:
        raise _invalid(str(exc)) from None
    except missing:
        raise _not_found(shown) from None
    except (NotAFolder, NotAFile) as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    except OSError as exc:
        raise ApiError(409, "conflict", f"'{shown}' cannot be used now: {exc.strerror or exc}.") from None


def _describe(folder: str, entry: Entry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "path": entry.name if folder == "." else f"{folder}/{entry.name}",
        "type": entry.kind,
        "size": entry.size,
        "modified_at": iso(dt.datetime.fromtimestamp(entry.mtime, dt.UTC)),
    }


def _page_params(request: Request) -> tuple[int, int]:
    limit_problem, cursor_problem = f"Must be an integer from 1 to {LIST_MAX}.", "Pass a `next` you received."
    limit, cursor = request.query_params.get("limit"), request.query_params.get("cursor")
    limit_value = LIST_LIMIT if limit is None else query_int(limit, "limit", limit_problem)
    start = query_int(cursor, "cursor", cursor_problem) if cursor else 0
    if not 1 <= limit_value <= LIST_MAX:
        raise invalid({"limit": [limit_problem]})
    if start < 0:
        raise invalid({"cursor": [cursor_problem]})
    return limit_value, start


PATH_PARAM = OpenApiParameter("path", str, OpenApiParameter.QUERY, description="A folder; default: the root")
LIMIT_PARAM = OpenApiParameter(
    "limit", {"type": "integer", "minimum": 1, "maximum": LIST_MAX}, description=f"1-{LIST_MAX} (default 200)"
)
CURSOR_PARAM = OpenApiParameter("cursor", str, OpenApiParameter.QUERY, description="`next` of the last page")
NOT_FOUND = "not_found: no such session (or another user's), or no such file"
INVALID_PATH = "invalid_path: absolute, `..` out of the workspace, or a symlink out"
CLOSED = "session_closed: the session is closed"
CONFLICT = "conflict: the path cannot be used now (a file on the way, changed while walked, refused)"


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
                    409: CONFLICT,
                }
            ),
        },
    )
    def get(self, request: Request, session_id: str) -> Response:
        _, workspace = _workspace(request, session_id)
        raw = request.query_params.get("path", ".")
        limit, start = _page_params(request)
        with _refusals(raw):
            try:
                shown, entries = list_folder(workspace, raw)
            except NotAFolder:
                raise ApiError(400, "not_a_directory", f"'{raw}' is not a folder.") from None
        entries.sort(key=lambda e: (e.kind != "directory", e.name.lower(), e.name))
        page = [_describe(shown, entry) for entry in entries[start : start + limit]]
        more = start + limit < len(entries)
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
            **errors({400: f"{INVALID_PATH}; not_a_file: a folder", 404: NOT_FOUND, 409: CONFLICT}),
        },
    )
    def get(self, request: Request, session_id: str, path: str) -> HttpResponseBase:
        _, workspace = _workspace(request, session_id)
        as_preview = query_flag(request.query_params.get("preview"), "preview")
        download = query_flag(request.query_params.get("download"), "download")
        with _refusals(path, missing=(PathMissing, NotAFolder)):
            try:
                fd, shown = open_file(workspace, path)
            except IsAFolder:
                raise ApiError(
                    400, "not_a_file", f"'{path}' is a folder; list it with GET …/files?path=."
                ) from None
            except NotAFile:
                raise ApiError(400, "not_a_file", f"'{path}' is not a regular file.") from None
        name = posixpath.basename(shown)
        if as_preview:
            with os.fdopen(fd, "rb") as handle:
                return Response(preview(handle, name=name, path=shown))
        return _stream(fd, name, download=download)

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
                    409: f"{CLOSED}; is_a_directory; {CONFLICT}",
                    413: "too_large: over AGENTSITE_MAX_UPLOAD_BYTES; quota_exceeded: past a disk quota",
                }
            ),
        },
    )
    def put(self, request: Request, session_id: str, path: str) -> Response:
        """The body is the file's bytes, as they are (any Content-Type); missing folders are created."""
        session, workspace = _workspace(request, session_id, write=True)
        quota = workspace_quota(user_id=session.user_id, session_id=session.id, workspace=workspace)
        with _refusals(path), parent_folder(workspace, path, create=True) as (folder, name):
            if name == "..":
                raise _invalid(f"The path '{path}' is not a file name.")
            before = folder.lstat(name)
            if before is not None and _is_folder(before):
                raise ApiError(409, "is_a_directory", f"'{path}' is a folder.")
            freed = before.st_blocks * 512 if before is not None and before.st_nlink == 1 else 0
            try:
                info = _receive(request, folder, name, quota, freed)
            except QuotaExceeded as exc:
                _audit_refusal(session, path, exc)
                raise ApiError(413, "quota_exceeded", str(exc)) from None
            quota.wrote(info.st_blocks * 512 - freed)
            entry = Entry(name, "file", info.st_size, info.st_mtime, info)
            shown = folder.shown()
        return Response(_describe(shown, entry), status=200 if before is not None else 201)

    @extend_schema(
        operation_id="chat_session_file_delete",
        responses={
            200: FileDeletedSerializer,
            **errors(
                {
                    400: f"{INVALID_PATH}; the workspace itself cannot be deleted",
                    404: NOT_FOUND,
                    409: f"{CLOSED}; {CONFLICT}",
                }
            ),
        },
    )
    def delete(self, request: Request, session_id: str, path: str) -> Response:
        """A file or symlink (never what it points at), or a folder with everything in it."""
        _, workspace = _workspace(request, session_id, write=True)
        with _refusals(path, missing=(PathMissing, NotAFolder)):
            with parent_folder(workspace, path) as (folder, name):
                info = folder.lstat(name)
                if info is None or name == "..":
                    raise _not_found(path)
                if _is_folder(info):
                    shutil.rmtree(name, dir_fd=folder.fd)  # descriptor-relative: no link is followed
                else:
                    os.unlink(name, dir_fd=folder.fd)
        usage.forget(workspace)  # measured again when next needed
        return Response({"path": _relative(path), "deleted": True})


def _is_folder(info: os.stat_result) -> bool:
    return (info.st_mode & 0o170000) == 0o040000


def _audit_refusal(session: Session, path: str, error: QuotaExceeded) -> None:
    audit_record(
        QUOTA_EXCEEDED,
        object_type="session",
        object_id=session.id,
        summary=f"upload of '{path}' refused: {error}"[:500],
        details={**error.details(), "what": "upload", "path": path, "session_id": session.id},
    )


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


def _receive(
    request: Request, folder: WorkspaceDir, name: str, quota: DiskQuota, freed: int
) -> os.stat_result:
    """Stream the body into a new file beside the target in the open `folder`, then put it in place (a
    symlink there is replaced, never written through). 413 `too_large` past AGENTSITE_MAX_UPLOAD_BYTES,
    QuotaExceeded past the room the quotas leave (the replaced file's bytes count as free)."""
    limit = settings.AGENTSITE_MAX_UPLOAD_BYTES
    room = quota.room()
    raw = request._request.META.get("CONTENT_LENGTH") or ""
    declared = int(raw) if raw.isascii() and raw.isdigit() else 0
    if declared > limit:
        raise ApiError(413, "too_large", f"The file is larger than the limit of {limit} bytes.")
    # Refused before a byte is read: already full, or the declared length does not fit.
    quota.check(max(declared, 1), freeing=freed)
    temporary = f".upload-{uuid.uuid4().hex}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o644, dir_fd=folder.fd)
    written = 0
    try:
        with os.fdopen(fd, "wb") as handle:
            while chunk := request._request.read(CHUNK):
                written += len(chunk)
                if written > limit:
                    raise ApiError(413, "too_large", f"The file is larger than the limit of {limit} bytes.")
                if room is not None and written > room + freed:
                    quota.check(written, freeing=freed)  # raises: past the room the quotas left
                    raise exceeded("workspace", written, room + freed)  # (freed meanwhile: still refused)
                handle.write(chunk)
            handle.flush()
            folder.give(temporary)
            info = os.fstat(handle.fileno())
        os.replace(temporary, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder.fd)
        raise
    return info
