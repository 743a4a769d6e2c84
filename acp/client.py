"""The ACP client: one external agent ("runner") subprocess and one ACP session with it.

`AcpConnection` is an async context manager that owns the child process from spawn to the death
of its whole process group. It speaks ACP (JSON-RPC over the child's stdio) through our own binding,
`acp.peer`, on a strict transport, serves `fs/*` inside the workspace, routes permission
requests through policy and then the `on_permission` callback, and hands `session/update`
notifications to `on_update` in arrival order. Every failure of the runner becomes
an `AcpError` with a sentence a user can act on; none leaves a hung call or a live process behind.

This module holds the connection's life (spawn, handshake, prompts, teardown); how one request to the
runner is bounded and its failures named is in `acp.calls`, how updates and permission requests that
the runner sends unasked reach the callbacks is in `acp.inbound`.

Plain asyncio: no Django. Persistence and publishing are the caller's callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Literal, Self

from acp.calls import call_runner, lost_runner_error
from acp.clock import RunnerClock
from acp.fs import read_text_file, write_text_file
from acp.inbound import Callbacks, OnPermission, OnPolicyDecision, OnUpdate, UpdateFeed, answer_permission
from acp.jsonrpc import INVALID_PARAMS, JsonRpcError
from acp.peer import AcpPeer
from acp.permissions import PendingPermissions
from acp.schema import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    InitializeRequest,
    ReadTextFileRequest,
    ReadTextFileResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from acp.spec import AcpError, AcpRunnerSpec
from acp.transport import StrictNdjsonTransport
from acp.updates import message_text
from agents.sandbox.children import RunnerProcess, SpawnError

ConnectionState = Literal["open", "running", "waiting_for_permission", "exited", "closed"]

CLIENT_NAME = "agentsite"
CLIENT_VERSION = "0.1.0"


class _ClientHandlers:
    """What the runner may ask of us (`acp.peer.ClientHandlers`), forwarded to the connection."""

    def __init__(self, owner: AcpConnection) -> None:
        self._owner = owner

    def session_update(self, notification: SessionNotification) -> None:
        self._owner._receive_update(notification)

    async def request_permission(self, request: RequestPermissionRequest) -> RequestPermissionResponse:
        return await self._owner._answer_permission(request)

    async def read_text_file(self, request: ReadTextFileRequest) -> ReadTextFileResponse:
        return await read_text_file(
            self._owner.spec.cwd,
            request.path,
            line=request.line,
            limit=request.limit,
            visible=self._owner.spec.visible_cwd,
        )

    async def write_text_file(self, request: WriteTextFileRequest) -> WriteTextFileResponse:
        if self._owner._approval_mode == "read_only":
            message = "Writing files is refused: approval mode read_only."
            raise JsonRpcError(INVALID_PARAMS, message, {"path": request.path})
        return await write_text_file(
            self._owner.spec.cwd, request.path, request.content, visible=self._owner.spec.visible_cwd
        )


class AcpConnection:
    """One runner subprocess and one ACP session with it.

    Use as `async with AcpConnection(spec, on_update=..., on_permission=...) as conn:` then
    `await conn.prompt(text)`. Leaving the block (or `close()`) ends the runner's whole process group.

    - `on_update(update)`: each rendered `session/update` (see `acp.updates`), in arrival order,
      from one consumer task; it may be async. It should not block for long: `prompt` waits for it.
    - `on_permission(request)`: asked when policy does not decide; returns an offered `option_id`, or
      None for the `cancelled` outcome. Its task is cancelled when `cancel()`/`close()` answer first.
    - `on_policy_decision(request, decision)`: told when policy answered without asking the user.
    - `startup_timeout` bounds `initialize` + `session/new`; `spec.timeout_seconds` bounds each prompt.
    - `shutdown_grace` / `term_grace`: how long `close()` waits after closing stdin / after SIGTERM.
    """

    def __init__(
        self,
        spec: AcpRunnerSpec,
        *,
        on_update: OnUpdate | None = None,
        on_permission: OnPermission | None = None,
        on_policy_decision: OnPolicyDecision | None = None,
        startup_timeout: float = 60.0,
        shutdown_grace: float = 1.0,
        term_grace: float = 2.0,
    ) -> None:
        self.spec = spec
        self._startup_timeout = startup_timeout
        self._shutdown_grace = shutdown_grace
        self._term_grace = term_grace
        self._defaults = Callbacks(on_update, on_permission, on_policy_decision)
        self._callbacks = self._defaults
        self._state: ConnectionState = "closed"
        self._process: RunnerProcess | None = None
        self._transport: StrictNdjsonTransport | None = None
        self._conn: AcpPeer | None = None
        self._updates = UpdateFeed(
            runner=spec.name, tool_parse_mode=spec.tool_parse_mode, callbacks=lambda: self._callbacks
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._exited = asyncio.Event()
        self._clock: RunnerClock | None = None
        self._reply: list[str] = []
        self._approval_mode = "ask"
        self._permissions = PendingPermissions()
        self._closing = False
        self._closed_by_caller = False
        self._teardown_task: asyncio.Task[None] | None = None
        self.session_id: str | None = None
        self.agent_info: Implementation | None = None
        self.agent_capabilities: AgentCapabilities | None = None
        self.stop_reason: str | None = None

    # -- public API ---------------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """`open` | `running` | `waiting_for_permission` | `exited` (runner died) | `closed`."""
        if self._state == "running" and self._permissions:
            return "waiting_for_permission"
        return self._state

    @property
    def alive(self) -> bool:
        """Whether the runner still answers (the tool server registry's word, agents/toolservers/)."""
        return self._state not in ("exited", "closed")

    @property
    def pid(self) -> int | None:
        """The runner's pid, which is also its process group id."""
        return self._process.pid if self._process else None

    @property
    def stderr_tail(self) -> str:
        """The last few KiB the runner wrote to stderr (for diagnostics)."""
        return self._process.stderr_tail.text() if self._process else ""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Spawn the runner, `initialize` it and open an ACP session in the workspace."""
        if self._process is not None:
            raise AcpError("This runner connection was already started.", code="busy")
        try:
            if self.spec.sandbox is None:
                raise SpawnError("no sandbox was given to start it in.")
            self._process = await RunnerProcess.spawn(
                self.spec.command,
                list(self.spec.args),
                sandbox=self.spec.sandbox,
                confinement=self.spec.confinement(),
            )
        except SpawnError as exc:
            self._state = "exited"
            raise AcpError(f"Runner '{self.spec.name}': {exc}", code="spawn_failed") from exc
        process = self._process.process
        assert process.stdout is not None and process.stdin is not None
        self._transport = StrictNdjsonTransport(process.stdout, process.stdin)
        # We serve what we advertise (fs, permissions, updates); anything else, terminals included,
        # is answered "method not found".
        self._conn = AcpPeer(self._transport, _ClientHandlers(self), name=f"acp-{self.spec.name}")
        self._conn.start()
        self._tasks = [
            asyncio.create_task(self._updates.deliver(), name="acp-updates"),
            asyncio.create_task(self._watch_exit(), name="acp-exit-watch"),
        ]
        try:
            await self._handshake()
        except BaseException:
            await self._teardown("exited")
            raise
        self._state = "open"

    async def prompt(
        self,
        text: str,
        *,
        approval_mode: str = "ask",
        on_update: OnUpdate | None = None,
        on_permission: OnPermission | None = None,
        on_policy_decision: OnPolicyDecision | None = None,
    ) -> str:
        """Send `session/prompt`; the runner's reply text (its `agent_message_chunk`s, joined).

        Bounded by the runner's `timeout_seconds` of its own time (waiting for the user's permission
        answer does not count). A timeout, crash or protocol violation ends the runner and raises.
        Callbacks given here replace the connection's for this prompt only (a session outlives the
        tool call that started it). Every update is delivered to `on_update` before this returns.
        """
        conn, session_id = self._ready_for_prompt()
        self._state = "running"
        self._reply = []
        self._approval_mode = approval_mode
        self.stop_reason = None
        self._callbacks = Callbacks(on_update, on_permission, on_policy_decision).over(self._defaults)
        try:
            response = await self._call(
                conn.prompt(session_id, text),
                phase="session/prompt",
                seconds=self.spec.timeout_seconds,
            )
            await self._updates.drained()
        except asyncio.CancelledError:
            await self._cancel_quietly()
            raise
        except AcpError as exc:
            await self._after_failure(exc)
            raise
        finally:
            self._callbacks = self._defaults
            self._approval_mode = "ask"
        self.stop_reason = response.stop_reason
        self._state = "open"
        return "".join(self._reply)

    async def cancel(self) -> None:
        """`session/cancel` the running prompt and answer pending permission requests `cancelled`."""
        self._permissions.cancel_all()
        if self._conn is None or self.session_id is None or self._state not in ("running", "open"):
            return
        with contextlib.suppress(ConnectionError, OSError):
            await self._conn.cancel(self.session_id)

    async def close(self) -> None:
        """End the session: close stdin, wait briefly, SIGTERM the group, wait, SIGKILL the group."""
        await self._teardown("closed")

    # -- handshake and calls ------------------------------------------------------------------------

    async def _handshake(self) -> None:
        conn = self._require_conn()
        initialize = InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
            ),
            client_info=Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
        )
        response = await self._call(
            conn.initialize(initialize),
            phase="initialize",
            seconds=self._startup_timeout,
        )
        if response.protocol_version != PROTOCOL_VERSION:
            raise AcpError(
                f"Runner '{self.spec.name}' speaks ACP protocol version {response.protocol_version}; "
                f"agentsite speaks version {PROTOCOL_VERSION}.",
                code="initialize_failed",
            )
        self.agent_info = response.agent_info
        self.agent_capabilities = response.agent_capabilities
        session = await self._call(
            conn.new_session(self.spec.visible_cwd),
            phase="session/new",
            seconds=self._startup_timeout,
        )
        self.session_id = session.session_id

    async def _call[T](self, request: Coroutine[Any, Any, T], *, phase: str, seconds: float) -> T:
        """Await one request to the runner (acp/calls.py): every failure becomes an AcpError."""
        self._clock = RunnerClock()
        return await call_runner(
            request,
            runner=self.spec.name,
            phase=phase,
            seconds=seconds,
            clock=self._clock,
            exited=self._exited,
            lost=self._lost_runner_error,
        )

    async def _lost_runner_error(self, phase: str) -> AcpError:
        return await lost_runner_error(
            runner=self.spec.name,
            phase=phase,
            closing=self._closing,
            violation=self._transport.violation if self._transport is not None else None,
            process=self._process,
        )

    def _ready_for_prompt(self) -> tuple[AcpPeer, str]:
        if self._state in ("running", "waiting_for_permission"):
            raise AcpError(f"Runner '{self.spec.name}' is still working on a prompt.", code="busy")
        if self._state == "exited":
            raise AcpError(f"Runner '{self.spec.name}' has exited; start it again.", code="closed")
        if self._state != "open" or self._conn is None or self.session_id is None:
            raise AcpError(f"Runner '{self.spec.name}' is not open.", code="closed")
        return self._conn, self.session_id

    async def _after_failure(self, exc: AcpError) -> None:
        """A failed prompt: an error answer leaves the session usable; anything else ends the runner."""
        if exc.code == "runner_error":
            self._state = "open"
            return
        await self._teardown("closed" if exc.code == "closed" else "exited")

    async def _cancel_quietly(self) -> None:
        """The caller gave up on the prompt (its task was cancelled): tell the runner, keep the session."""
        self._permissions.cancel_all()
        if self._conn is not None and self.session_id is not None and self._state == "running":
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._conn.cancel(self.session_id)), 1.0)
            self._state = "open"

    def _require_conn(self) -> AcpPeer:
        assert self._conn is not None
        return self._conn

    # -- incoming: updates, permissions, files ------------------------------------------------------

    def _receive_update(self, notification: SessionNotification) -> None:
        """Called in arrival order, before the runner's next message is read: queue and return."""
        if notification.session_id != self.session_id:
            return
        update = notification.update
        text = message_text(update)
        if text is not None and self._state == "running":
            self._reply.append(text)
        self._updates.put(update)

    async def _answer_permission(self, params: RequestPermissionRequest) -> RequestPermissionResponse:
        return await answer_permission(
            params,
            spec=self.spec,
            approval_mode=self._approval_mode,
            callbacks=self._callbacks,
            pending=self._permissions,
            clock=self._clock,
            closing=self._closing,
        )

    # -- lifetime ------------------------------------------------------------------------------------

    async def _watch_exit(self) -> None:
        """Notice a runner that exits on its own, even while no call is waiting on it."""
        assert self._process is not None
        await self._process.process.wait()
        self._exited.set()
        if self._closing:
            return
        idle = self._state == "open"
        if self._state in ("open", "running"):
            self._state = "exited"
        if idle:  # nobody is waiting on it: end what it left behind now (a prompt does so itself)
            self._begin_teardown()

    async def _teardown(self, final_state: ConnectionState) -> None:
        """Stop everything exactly once; concurrent callers wait for the same shutdown."""
        if final_state == "closed":
            self._closed_by_caller = True
        teardown = self._begin_teardown()
        try:
            await asyncio.shield(teardown)
        except asyncio.CancelledError:
            await teardown
            raise
        finally:
            self._state = "closed" if self._closed_by_caller else "exited"

    def _begin_teardown(self) -> asyncio.Task[None]:
        """Start the one shutdown task (without waiting for it) and refuse new work from now on."""
        self._closing = True
        self._permissions.cancel_all()
        if self._teardown_task is None:
            self._teardown_task = asyncio.ensure_future(self._shutdown())
        return self._teardown_task

    async def _shutdown(self) -> None:
        if self._process is not None:
            await self._process.terminate(grace=self._shutdown_grace, term_grace=self._term_grace)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        for task in self._tasks:
            if task is not current:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
