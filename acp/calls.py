"""One request to a runner: bounded by the runner's own time, and every way it can fail as an AcpError.

A request can fail because the runner answers with an error, answers nonsense, stops answering, exits,
breaks the protocol on stdout, or is closed by us while it works; each becomes one `AcpError` whose
code says which and whose sentence a user can act on. The connection (acp/client.py) keeps the state
these answers read (its process, transport and whether it is closing) and hands it over here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pydantic import ValidationError

from acp.clock import RunnerClock
from acp.jsonrpc import JsonRpcError, ProtocolViolation
from acp.spec import AcpError, ErrorCode
from agents.sandbox.children import RunnerProcess

EXIT_GRACE_SECONDS = 0.5  # after the runner exits, how long its last stdout frames may still arrive


async def call_runner[T](
    request: Coroutine[Any, Any, T],
    *,
    runner: str,
    phase: str,
    seconds: float,
    clock: RunnerClock,
    exited: asyncio.Event,
    lost: Callable[[str], Awaitable[AcpError]],
) -> T:
    """Await one request to the runner named `runner`, turning every way it can fail into an AcpError.

    `seconds` of the runner's own time (`clock`); `exited` is set when its process ends; `lost(phase)`
    explains a connection that ended (see :func:`lost_runner_error`).
    """
    task = asyncio.ensure_future(request)
    try:
        return await _bounded(
            task, runner=runner, phase=phase, seconds=seconds, clock=clock, exited=exited, lost=lost
        )
    except JsonRpcError as exc:
        code: ErrorCode = "initialize_failed" if phase == "initialize" else "runner_error"
        raise AcpError(f"Runner '{runner}' refused {phase}: {describe(exc)}", code=code) from exc
    except (ValidationError, ProtocolViolation) as exc:
        raise AcpError(
            f"Runner '{runner}' answered {phase} with an invalid message.", code="protocol_error"
        ) from exc
    except (ConnectionError, OSError) as exc:
        raise await lost(phase) from exc
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _bounded[T](
    task: asyncio.Future[T],
    *,
    runner: str,
    phase: str,
    seconds: float,
    clock: RunnerClock,
    exited: asyncio.Event,
    lost: Callable[[str], Awaitable[AcpError]],
) -> T:
    """Wait for `task` within `seconds` of the runner's own time, noticing early if it exits."""
    while True:
        remaining = None if clock.paused else seconds - clock.used()
        if remaining is not None and remaining <= 0:
            raise AcpError(
                f"Runner '{runner}' did not answer {phase} within {seconds:g} seconds.", code="timeout"
            )
        changed = asyncio.ensure_future(clock.changed())
        exit_seen = asyncio.ensure_future(exited.wait())
        waiters: set[asyncio.Future[Any]] = {task, changed, exit_seen}
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            exit_seen.cancel()
        if task.done():
            return task.result()
        if exited.is_set():
            # Its last frames may still be in the pipe: give them a moment before calling it a crash.
            await asyncio.wait({task}, timeout=EXIT_GRACE_SECONDS)
            if task.done():
                return task.result()
            raise await lost(phase)


async def lost_runner_error(
    *, runner: str, phase: str, closing: bool, violation: str | None, process: RunnerProcess | None
) -> AcpError:
    """Explain why the connection to the runner ended during `phase`: closed by us, a protocol
    violation on its stdout, or its exit (with the end of what it wrote to stderr)."""
    if closing:
        return AcpError(f"Runner '{runner}' was closed.", code="closed")
    if violation:
        return AcpError(f"Runner '{runner}': {violation}", code="protocol_error")
    assert process is not None
    returncode = await process.wait_exit(EXIT_GRACE_SECONDS)
    status = f"exited with code {returncode}" if returncode is not None else "closed its output"
    status += process.memory_note()
    code: ErrorCode = "initialize_failed" if phase in ("initialize", "session/new") else "crashed"
    message = f"Runner '{runner}' {status} during {phase}."
    tail = process.stderr_tail.text()
    if tail:
        message += f" Its last error output: {tail[-500:]}"
    return AcpError(message, code=code)


def describe(exc: JsonRpcError) -> str:
    """The runner's error message plus its detail, if it gave one."""
    message = exc.message
    data = exc.data
    if isinstance(data, dict):
        detail = data.get("details") or data.get("detail") or data.get("message")
        if detail:
            message = f"{message} ({detail})"
    return message
