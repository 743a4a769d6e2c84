"""A strict newline-delimited JSON-RPC transport over a runner's stdin/stdout.

A lenient stdio transport (the official ACP SDK's, for one) logs and skips lines that are not JSON,
so a runner that prints banners or debug output to stdout would look alive while its answers never
come: a hung turn. This transport treats the first non-protocol line as the end of the stream and
remembers why, so the client can fail at once with a clear message. It is the `MessageTransport` of
`acp.jsonrpc`, which reports `violation` as the reason its pending calls failed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

_JUNK_PREVIEW_CHARS = 120


class StrictNdjsonTransport:
    """Moves JSON-RPC messages as one JSON object per line; any other output ends the stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.violation: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame; raises ConnectionError when the runner's stdin is gone."""
        if self._writer.is_closing():
            raise ConnectionError("The runner's stdin is closed.")
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            self._writer.write(data.encode("utf-8"))
            await self._writer.drain()
        except (BrokenPipeError, ConnectionResetError, RuntimeError) as exc:
            raise ConnectionError("The runner's stdin is closed.") from exc

    async def receive(self) -> dict[str, Any] | None:
        """Next message, or None at end of stream (EOF, or a protocol violation recorded in `violation`)."""
        while True:
            try:
                line = await self._reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                self.violation = "The runner wrote a line on stdout larger than the protocol limit."
                return None
            if not line:
                return None
            text = line.strip()
            if not text:
                continue
            message = _parse_frame(text)
            if message is None:
                preview = text[:_JUNK_PREVIEW_CHARS].decode("utf-8", errors="replace")
                self.violation = f"The runner wrote non-protocol output on stdout: {preview!r}."
                return None
            return message

    async def close(self) -> None:
        """Close the runner's stdin: a well-behaved runner exits on EOF."""
        if not self._writer.is_closing():
            self._writer.close()


def _parse_frame(text: bytes) -> dict[str, Any] | None:
    """The JSON-RPC object in `text`, or None when the line is not a JSON-RPC message."""
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if not isinstance(message, dict) or not ("method" in message or "id" in message):
        return None
    return message
