"""One connection to one MCP server, through the official SDK's `ClientSession` (PyPI `mcp`).

`McpConnection` owns the connection from start to close in a task of its own: the SDK keeps anyio task
groups and cancel scopes open for the life of a session, and those must be left by the task that entered
them, while the connection is started by one turn, used by later ones and closed by whatever ends it (the
chat session's close, the idle reaper, server shutdown). Calls come from the turns' tasks.

Transports: stdio (mcpservers/stdio.py: the server runs in the site's sandbox, docs/protocol.md §6.1) and
streamable HTTP (the SDK's `streamable_http_client`, on an HTTP client that connects only where the
outbound rule allows, security/outbound.py, §6.3).

Every failure is an `McpError` whose message is one sentence naming the server: it does not start, it
crashed or hung (the call is bounded by `timeout_seconds`, and a server that does not answer is stopped),
it broke the protocol. Plain asyncio and the SDK, no Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
import pydantic
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from agents.sandbox import Confinement, SandboxRefused
from agents.sandbox.children import SpawnError
from agents.toolservers.launch import SandboxedLaunch
from mcpservers.stdio import LinkState, sandboxed_stdio
from security.outbound import OutboundPolicy, OutboundRefused

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="agentsite", version="0.1.0")
MAX_TOOL_PAGES = 50
_CLOSE_SECONDS = 10.0

ErrorCode = Literal[
    "refused", "spawn_failed", "start_failed", "crashed", "timeout", "protocol_error", "rejected"
]
OnToolsChanged = Callable[[list[types.Tool]], Awaitable[None]]


class McpError(Exception):
    """An MCP server failed; `message` is a sentence naming it, `code` a stable kind."""

    def __init__(self, message: str, *, code: ErrorCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, kw_only=True)
class McpServerSpec(SandboxedLaunch):
    """How to reach one server: its stored configuration plus, for stdio, where it runs (`SandboxedLaunch`'s
    fields, agents/toolservers/launch.py; the chat session's workspace, reachable but not its working
    directory, docs/protocol.md §6.6)."""

    name: str
    transport: Literal["stdio", "http"]
    timeout_seconds: float  # each call
    start_seconds: float = 60.0  # starting it, `initialize` and listing its tools
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    workspace: Path | None = None
    policy: OutboundPolicy | None = None

    def confinement(self) -> Confinement:
        """Where a stdio server runs: as a runner (agents/sandbox/children.py)."""
        assert self.workspace is not None
        # It holds staff's secrets: never started where a user's files lie (§6.6).
        return self.confined_in(self.workspace, empty_cwd=True)

    def fingerprint(self) -> tuple[Any, ...]:
        """What a running connection was made from: when it differs, the connection is made anew."""
        return (
            self.transport,
            self.command,
            tuple(self.args),
            sorted(self.env.items()),
            self.url,
            sorted(self.headers.items()),
            self.workspace,
            self.network,
            self.read_only,
            self.may_run_unsandboxed,
        )


class McpConnection:
    """A live session with one MCP server: `await start()` (its tools), `await call_tool(...)`, `close()`."""

    def __init__(self, spec: McpServerSpec, *, on_tools_changed: OnToolsChanged | None = None) -> None:
        self.spec = spec
        self.tools: list[types.Tool] = []
        self.last_used = time.monotonic()
        self.calls = 0  # in flight
        self._on_tools_changed = on_tools_changed
        self._link = LinkState()
        self._session: ClientSession | None = None
        self._ready: asyncio.Future[list[types.Tool]] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._closing = False

    @property
    def alive(self) -> bool:
        return self._session is not None and not self._closing and not self._link.ended.is_set()

    # -- life -----------------------------------------------------------------------------------------

    async def start(self) -> list[types.Tool]:
        """Start the server, `initialize`, list its tools; bounded by `start_seconds`. McpError on failure
        (and nothing is left running)."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(), name=f"mcp-{self.spec.name}")
        try:
            async with asyncio.timeout(self.spec.start_seconds):
                return await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            raise McpError(
                f"MCP server '{self.spec.name}' did not start within {self.spec.start_seconds:g} s"
                f"{self._last_words()}.",
                code="timeout",
            ) from None
        except BaseException:
            await asyncio.shield(self.close())
            raise

    async def close(self) -> None:
        """End the session and, for stdio, the server's whole process group. Idempotent."""
        self._closing = True
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), _CLOSE_SECONDS)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        ready = self._ready
        if ready is not None and ready.done() and not ready.cancelled():
            ready.exception()  # start() reported it, or nobody waits for it any more: not "never retrieved"

    async def _own(self) -> None:
        assert self._ready is not None
        try:
            async with self._transport() as (read, write):
                async with ClientSession(
                    read, write, message_handler=self._on_message, client_info=CLIENT_INFO
                ) as session:
                    await session.initialize()
                    self.tools = await _list_tools(session)
                    self._session = session
                    self._ready.set_result(self.tools)
                    await _first_of(self._stop.wait(), self._link.ended.wait())
        except BaseException as exc:
            self._failure = exc
            if not self._ready.done():
                self._ready.set_exception(self._start_error(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
            if not self._closing:
                logger.info("MCP server %s: the connection ended: %r", self.spec.name, exc)
        finally:
            self._session = None
            if not self._ready.done():
                self._ready.set_exception(
                    McpError(f"MCP server '{self.spec.name}' was closed.", code="crashed")
                )

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        spec = self.spec
        if spec.transport == "stdio":
            if spec.sandbox is None or spec.workspace is None:
                raise SandboxRefused("Programs cannot run here: no sandbox was given to this call.")
            argv = [spec.command, *spec.args]
            async with sandboxed_stdio(
                argv, sandbox=spec.sandbox, confinement=spec.confinement(), link=self._link
            ) as streams:
                yield streams
            return
        from mcp.client.streamable_http import streamable_http_client

        async with (
            _http_client(spec) as client,
            streamable_http_client(spec.url, http_client=client) as streams,
        ):
            yield streams

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        """Server notifications: a changed tool list is listed again and handed on."""
        if isinstance(message, types.ToolListChangedNotification) and self._session is not None:
            try:
                self.tools = await _list_tools(self._session)
            except Exception as exc:
                logger.info("MCP server %s: listing its changed tools failed: %r", self.spec.name, exc)
                return
            if self._on_tools_changed is not None:
                await self._on_tools_changed(self.tools)

    # -- calls ----------------------------------------------------------------------------------------

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one tool, bounded by `timeout_seconds`; a server that does not answer in time is stopped."""
        session = self._session
        if session is None or not self.alive:
            raise McpError(f"MCP server '{self.spec.name}' is not running.", code="crashed")
        self.calls += 1
        self.last_used = time.monotonic()
        try:
            async with asyncio.timeout(self.spec.timeout_seconds):
                result = await session.call_tool(name, arguments)
        except TimeoutError:
            await self.close()
            raise McpError(
                f"MCP server '{self.spec.name}' did not answer the call of '{name}' within "
                f"{self.spec.timeout_seconds:g} s; it was stopped and starts again on the next call.",
                code="timeout",
            ) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                await self.close()
                raise McpError(
                    self._lost_message(f"during the call of '{name}'"), code=self._lost_code()
                ) from None
            raise McpError(
                f"MCP server '{self.spec.name}' answered the call of '{name}' with an error: {exc.message}",
                code="rejected",
            ) from None
        except (pydantic.ValidationError, RuntimeError) as exc:
            raise McpError(
                f"MCP server '{self.spec.name}' answered the call of '{name}' with something that is not an "
                f"MCP tool result ({_first_line(exc)}).",
                code="protocol_error",
            ) from None
        finally:
            self.calls -= 1
            self.last_used = time.monotonic()
        if not isinstance(result, types.CallToolResult):
            raise McpError(
                f"MCP server '{self.spec.name}' answered the call of '{name}' with a result of another kind.",
                code="protocol_error",
            )
        return result

    # -- how it failed --------------------------------------------------------------------------------

    def _start_error(self, exc: BaseException) -> McpError:
        name = self.spec.name
        cause = _leaf(exc)
        if isinstance(cause, SpawnError) and isinstance(cause.__cause__, SandboxRefused):
            cause = cause.__cause__
        if isinstance(cause, SandboxRefused):  # this user may not start it here: not the server's fault
            return McpError(f"MCP server '{name}' could not be started: {cause}", code="refused")
        if isinstance(cause, OutboundRefused):
            return McpError(f"MCP server '{name}' was not contacted: {cause}", code="refused")
        if isinstance(cause, SpawnError):
            return McpError(f"MCP server '{name}' could not be started: {cause}", code="spawn_failed")
        if isinstance(cause, asyncio.CancelledError):
            return McpError(f"MCP server '{name}' was closed while it started.", code="crashed")
        if isinstance(cause, MCPError) and cause.code == CONNECTION_CLOSED:
            return McpError(self._lost_message("while it started"), code=self._lost_code())
        if isinstance(cause, MCPError):
            return McpError(f"MCP server '{name}' failed to initialize: {cause.message}", code="start_failed")
        return McpError(
            f"MCP server '{name}' could not be started: {_first_line(cause)}.", code="start_failed"
        )

    def _lost_code(self) -> ErrorCode:
        return "protocol_error" if self._link.lost and "not MCP" in self._link.lost else "crashed"

    def _lost_message(self, when: str) -> str:
        name = self.spec.name
        if self._closing and self._link.lost is None:
            return f"MCP server '{name}' was closed {when}."
        if self._link.lost is not None:
            return f"MCP server '{name}' stopped {when}: {self._link.lost}{self._last_words()}."
        failure = _leaf(self._failure) if self._failure is not None else None
        if failure is not None and not isinstance(failure, asyncio.CancelledError):
            return f"MCP server '{name}' failed {when}: {_first_line(failure)}."
        return f"MCP server '{name}' closed the connection {when}."

    def _last_words(self) -> str:
        tail = self._link.stderr_tail()
        return f". Its last output: {tail[-500:]}" if tail else ""


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool the server offers (all pages)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _http_client(spec: McpServerSpec) -> Any:
    """An httpx2 client (the SDK's HTTP library) that connects only where the outbound rule allows, with
    the configured headers; no proxy from the environment (the transport pins checked addresses)."""
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT

    from security.outbound import GuardedTransport

    policy = spec.policy or OutboundPolicy()
    transport: Any = GuardedTransport(httpx2.AsyncHTTPTransport(), policy)  # httpx2 in all but name
    timeout = httpx2.Timeout(
        spec.timeout_seconds, read=max(spec.timeout_seconds, MCP_DEFAULT_SSE_READ_TIMEOUT)
    )
    return httpx2.AsyncClient(
        transport=transport, headers=dict(spec.headers), timeout=timeout, trust_env=False
    )


async def _first_of(*waits: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group, and not a cancellation when something else failed."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)] or list(
            exc.exceptions
        )
        exc = inner[0]
    return exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
