"""An MCP server over stdio, started by the one sandbox launcher (agents/sandbox/).

The SDK's own `stdio_client` starts its process itself, with the server's PATH and HOME in the launcher's
environment and as the server's own OS user; a stdio MCP server of ours is third-party code and runs where
every tool's process runs (docs/protocol.md §6.1): in the sandbox, as the sandbox's user, the leader of a
process group of its own that is ended as a whole. So the process comes from
:class:`agents.sandbox.children.RunnerProcess`, and this module is only the pipe between it and the SDK's
`ClientSession`: newline-delimited JSON-RPC on its stdin and stdout, the same framing as the SDK's.

Stricter than the SDK in one point: stdout is the protocol's alone (the MCP specification says a server
MUST NOT write anything else there). A line that is not a JSON-RPC message ends the connection at once,
with that line quoted in the error, instead of leaving the call it should have answered to a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from agents.sandbox import Confinement, Sandbox
from agents.sandbox.children import RunnerProcess

SHOWN_LINE_CHARS = 200
_EXIT_WAIT_SECONDS = 1.0

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


@dataclass
class LinkState:
    """Why the pipe to the server ended, as a clause for error messages (None: it has not)."""

    lost: str | None = None
    process: RunnerProcess | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # set once `lost` is

    def stderr_tail(self) -> str:
        return self.process.stderr_tail.text() if self.process is not None else ""


@contextlib.asynccontextmanager
async def sandboxed_stdio(
    argv: list[str], *, sandbox: Sandbox, confinement: Confinement, link: LinkState
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Start `argv` confined and yield the SDK's stream pair over its stdio; on exit its process group
    ends (raises SpawnError or SandboxRefused when it cannot start)."""
    process = await RunnerProcess.spawn(argv[0], argv[1:], sandbox=sandbox, confinement=confinement)
    link.process = process
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    tasks = [
        asyncio.create_task(_read(process, read_writer, link), name=f"mcp-stdout-{process.pid}"),
        asyncio.create_task(_write(process, write_reader), name=f"mcp-stdin-{process.pid}"),
    ]
    try:
        yield read_stream, write_stream
    finally:
        await process.terminate(grace=0.5)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for stream in (read_stream, read_writer, write_stream, write_reader):
            stream.close()


async def _read(
    process: RunnerProcess, into: MemoryObjectSendStream[SessionMessage | Exception], link: LinkState
) -> None:
    """Server stdout → session; at its end or at the first line that is not MCP, the session's read stream
    closes (its pending requests fail at once) and `link.lost` says why."""
    stdout = process.process.stdout
    assert stdout is not None
    try:
        async with into:
            await _forward(process, stdout, into, link)
    finally:
        link.ended.set()


async def _forward(
    process: RunnerProcess,
    stdout: asyncio.StreamReader,
    into: MemoryObjectSendStream[SessionMessage | Exception],
    link: LinkState,
) -> None:
    while True:
        try:
            line = await stdout.readline()
        except ValueError:  # longer than the pipe's line limit
            link.lost = "it wrote a line longer than the limit on its stdout"
            return
        except (OSError, asyncio.IncompleteReadError):
            line = b""
        if not line:
            code = await process.wait_exit(_EXIT_WAIT_SECONDS)
            link.lost = "its process ended" + (f" (exit code {code})" if code is not None else "")
            link.lost += process.memory_note()
            return
        if not line.strip():
            continue
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            shown = line.decode("utf-8", errors="replace").strip()[:SHOWN_LINE_CHARS]
            link.lost = f"it wrote something that is not MCP on its stdout: {shown!r}"
            return
        try:
            await into.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return


async def _write(process: RunnerProcess, source: MemoryObjectReceiveStream[SessionMessage]) -> None:
    """Session → server stdin, one JSON line per message (the SDK's own serialisation)."""
    stdin = process.process.stdin
    assert stdin is not None
    async with source:
        async for message in source:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                stdin.write(data.encode() + b"\n")
                await stdin.drain()
            except (OSError, RuntimeError):  # the server closed its stdin or is gone: the reader says why
                return
