"""Just enough HTTP/1.1 for the fake model server (agentsite/dev/fake_llm.py), over asyncio streams.

Requests with a Content-Length body, keep-alive, JSON answers and errors in the shape OpenAI sends them;
the chunked encoding the streamed answers use. No dependency beyond the standard library: the fake
server also runs as a bare subprocess, without Django.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

_MAX_BODY = 16 * 1024 * 1024
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class ClientGone(Exception):
    """The peer closed the connection (or sent something we cannot read)."""


def chunked(data: bytes) -> bytes:
    """One piece of a chunked body (the streamed answers have no length known in advance)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


async def read_request(reader: asyncio.StreamReader) -> HttpRequest:
    """The next request on a kept-alive connection; ClientGone when the peer left or sent nonsense."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise ClientGone from exc
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2:
        raise ClientGone
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length > _MAX_BODY:
        raise ClientGone
    body = await reader.readexactly(length) if length else b""
    return HttpRequest(parts[0].upper(), parts[1], headers, body)


def decode_json(body: bytes) -> Any:
    """The body as JSON, or None: a broken body is recorded (and answered 400) rather than fatal."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


async def send_json(
    writer: asyncio.StreamWriter, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(payload).encode()
    reason = _REASONS.get(status, "Error")
    extra = "".join(f"{key}: {value}\r\n" for key, value in (headers or {}).items())
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(data)}\r\n{extra}\r\n".encode()
        + data
    )
    await writer.drain()


async def send_error(
    writer: asyncio.StreamWriter, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    """An error in OpenAI's shape, so the real client raises the exception it raises in production."""
    error_type = _ERROR_TYPES.get(status, "server_error")
    body = {"error": {"message": message, "type": error_type, "code": None}}
    await send_json(writer, status, body, headers)
