"""The ``shell`` tool: one ``/bin/sh -c`` command in the session workspace, bounded in every way.

Bounds: a timeout (the whole process group is killed, so ``sleep`` children die too), an
output cap (head and tail are kept, since errors tend to be at the end), and a minimal
environment so the server's secrets (``OPENAI_API_KEY``, ``SECRET_KEY``, ...) never reach it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from agents.approvals import always_refused
from agents.tools.base import Risk, Tool, ToolContext, ToolError, ToolParams

DEFAULT_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 600
OUTPUT_HEAD_BYTES = 48 * 1024
OUTPUT_TAIL_BYTES = 16 * 1024
OUTPUT_CAP_BYTES = OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES
# After the shell exits, how long to wait for output still buffered in the pipe.
_DRAIN_SECONDS = 2.0
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def shell_environment(workspace: Path) -> dict[str, str]:
    """The complete environment of a command: built from scratch, never copied from the server's."""
    return {"PATH": SAFE_PATH, "HOME": str(workspace), "LANG": "C.UTF-8", "TERM": "dumb"}


class ShellParams(ToolParams):
    command: str = Field(description="The command line, run by /bin/sh -c in the workspace.", min_length=1)
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description=f"Kill the command after this many seconds (default {DEFAULT_TIMEOUT_SECONDS}).",
    )


class ShellTool(Tool):
    name = "shell"
    description = (
        "Run a shell command (/bin/sh -c) in the workspace folder and return its combined stdout and "
        f"stderr (capped at {OUTPUT_CAP_BYTES // 1024} KiB) and exit code. Processes it starts are killed "
        "when it ends or times out."
    )
    Params = ShellParams
    risk: ClassVar[Risk] = "dangerous"

    def describe(self, params: BaseModel) -> str | None:
        assert isinstance(params, ShellParams)
        return params.command

    def refusal_reason(self, params: BaseModel) -> str | None:
        assert isinstance(params, ShellParams)
        return always_refused(params.command)

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, ShellParams)
        reason = always_refused(params.command)
        if reason is not None:  # defence in depth: the approval step should have refused already
            raise ToolError(f"Refused: {reason}")
        output, returncode, timed_out = await run_command(
            params.command, cwd=ctx.workspace, limit_seconds=params.timeout_seconds
        )
        if timed_out:
            raise ToolError(
                f"The command timed out after {params.timeout_seconds} s and was killed with every "
                f"process it started. Output before the timeout:\n{output or '(no output)'}"
            )
        return f"{output or '(no output)'}\n{_exit_note(returncode)}"


def _exit_note(returncode: int) -> str:
    if returncode < 0:
        return f"[killed by signal {signal.Signals(-returncode).name}]"
    return f"[exit code: {returncode}]"


class _OutputBuffer:
    """Keeps the first and the last bytes of a stream and counts what falls in between."""

    def __init__(self, head_limit: int = OUTPUT_HEAD_BYTES, tail_limit: int = OUTPUT_TAIL_BYTES) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._head_limit = head_limit
        self._tail_limit = tail_limit

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: -self._tail_limit]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return (
            f"{head}\n[output truncated: {omitted} of {self.total} bytes omitted; "
            f"showing the first {len(self.head)} and the last {len(self.tail)} bytes]\n{tail}"
        )


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Collects output and tells apart "the shell exited" from "the pipe closed".

    ``asyncio.subprocess.Process.wait()`` waits for both, so a background job holding the
    pipe would keep us waiting for it; here the shell's exit is seen at once.
    """

    def __init__(self, buffer: _OutputBuffer) -> None:
        self.buffer = buffer
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.buffer.feed(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


async def run_command(command: str, *, cwd: Path, limit_seconds: float) -> tuple[str, int, bool]:
    """Run ``command`` in its own process group; return (capped output, exit code, timed out).

    The group is killed whenever we stop waiting — normal exit (leftover background jobs),
    timeout, or cancellation of the turn — so nothing the model started outlives the call.
    """
    buffer = _OutputBuffer()
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _CommandProtocol(buffer),
            "/bin/sh",
            "-c",
            command,
            cwd=cwd,
            env=shell_environment(cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"Could not start the shell in the workspace: {exc.strerror}.") from None
    pid = transport.get_pid()
    try:
        timed_out = not await _wait_for(protocol.exited, limit_seconds)
        _kill_group(pid)
        await _wait_for(protocol.exited, _DRAIN_SECONDS)
        # Output still in the pipe; a process that left the group (setsid) may hold it open.
        await _wait_for(protocol.output_closed, _DRAIN_SECONDS)
    finally:
        if transport.get_returncode() is None:
            _kill_group(pid)
        transport.close()
    returncode = transport.get_returncode()
    return buffer.text(), -signal.SIGKILL if returncode is None else returncode, timed_out


async def _wait_for(event: asyncio.Event, limit_seconds: float) -> bool:
    """Wait for ``event`` at most ``limit_seconds``; say whether it happened."""
    try:
        async with asyncio.timeout(limit_seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
