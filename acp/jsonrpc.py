"""A small JSON-RPC 2.0 connection: requests both ways, notifications, errors, clean ends.

ACP runs JSON-RPC over a child's stdio, and both sides call each other: we send `initialize`,
`session/prompt` ...; the runner sends `session/request_permission` and `fs/*` while a prompt is
still outstanding. This module is only that plumbing, with no knowledge of ACP's messages (see
`acp.schema`) or of processes (see `agents.sandbox.children`):

- `request()` sends a call with a fresh integer id and waits for the response with that id; any
  number may be outstanding at once. An error response raises `JsonRpcError` (code, message, data);
  a response that is neither a result nor a well-formed error raises `ProtocolViolation`.
- Incoming requests run each in its own task (a permission request may wait minutes for a user
  while other messages keep flowing) and are answered with the handler's result or error; a method
  without a handler is answered -32601. Incoming notifications are handled inline, in arrival order,
  before the next message is read: an update must reach its consumer before the response that ends
  the prompt does, so a notification handler must be quick (queue and return).
- When the stream ends (EOF, a transport violation, `close()`), every outstanding and every later
  call fails with `ConnectionClosed`, so nothing waits for an answer that cannot come.

Plain asyncio: no Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Protocol, Self, TypeGuard

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

RequestId = int | str
RequestHandler = Callable[[Any], Awaitable[Any]]
NotificationHandler = Callable[[Any], Awaitable[None] | None]


class MessageTransport(Protocol):
    """Moves whole JSON-RPC messages (decoded objects); `receive` returns None at end of stream."""

    async def send(self, message: dict[str, Any]) -> None: ...

    async def receive(self) -> dict[str, Any] | None: ...

    async def close(self) -> None: ...


class JsonRpcError(Exception):
    """A JSON-RPC error object: raised for an error response, or by a handler to answer with one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        """The `error` member of a response (`data` only when there is some)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"JsonRpcError({self.code}, {self.message!r}, {self.data!r})"


class ConnectionClosed(ConnectionError):
    """The stream ended or the connection was closed: the call cannot be answered."""


class ProtocolViolation(Exception):
    """The peer answered a call with something that is not a JSON-RPC response."""


class JsonRpcConnection:
    """One JSON-RPC 2.0 peer over a message transport (see the module docstring for the rules).

    `requests` and `notifications` map method names to the handlers for what the peer sends; a
    request handler returns the JSON result (or raises `JsonRpcError`), a notification handler may
    be sync or async. Call `start()` (or use `async with`) to begin reading, `close()` to end.
    """

    def __init__(
        self,
        transport: MessageTransport,
        *,
        requests: Mapping[str, RequestHandler] | None = None,
        notifications: Mapping[str, NotificationHandler] | None = None,
        name: str = "jsonrpc",
    ) -> None:
        self._transport = transport
        self._requests = dict(requests or {})
        self._notifications = dict(notifications or {})
        self._name = name
        self._next_id = 0
        self._pending: dict[RequestId, asyncio.Future[Any]] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self._receiver: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()
        self._end_reason = "The connection is not started."
        self._closed = False

    # -- lifetime -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin reading messages (idempotent)."""
        if self._receiver is None and not self._closed:
            self._end_reason = "The connection ended."
            self._receiver = asyncio.create_task(self._receive_loop(), name=f"{self._name}-receive")

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def ended(self) -> bool:
        """True once the stream ended or `close()` was called: no call can succeed any more."""
        return self._ended.is_set()

    async def wait_ended(self) -> None:
        """Return when the stream has ended (EOF, transport violation or `close()`)."""
        await self._ended.wait()

    async def close(self) -> None:
        """Fail outstanding calls, stop reading, cancel running request handlers, close the transport."""
        if self._closed:
            return
        self._closed = True
        self._end("The connection was closed.")
        current = asyncio.current_task()
        tasks = [
            task for task in (self._receiver, *self._handlers) if task is not None and task is not current
        ]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self._transport.close()

    # -- outgoing -------------------------------------------------------------------------------------

    async def request(self, method: str, params: Any = None) -> Any:
        """Call `method` on the peer and return its result.

        Raises `JsonRpcError` for an error response, `ProtocolViolation` for a malformed one and
        `ConnectionClosed` (a `ConnectionError`) when the stream ends before the answer comes.
        Cancelling the caller forgets the call; a late answer to it is ignored.
        """
        self._raise_if_ended()
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self._transport.send(_message(method, params, request_id=request_id))
            return await future
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer is expected or possible)."""
        self._raise_if_ended()
        await self._transport.send(_message(method, params))

    # -- incoming -------------------------------------------------------------------------------------

    async def _receive_loop(self) -> None:
        reason = "The peer closed the connection."
        try:
            while True:
                message = await self._transport.receive()
                if message is None:
                    # A strict transport records why it stopped reading (see acp.transport).
                    reason = getattr(self._transport, "violation", None) or reason
                    break
                await self._dispatch(message)
        except asyncio.CancelledError:
            reason = "The connection was closed."
            raise
        except Exception as exc:  # a transport failing to read is the end of the stream too
            logger.warning("%s: reading failed: %r", self._name, exc)
            reason = f"Reading from the peer failed: {exc}"
        finally:
            self._end(reason)

    async def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            self._receive_response(message)
            return
        request_id = message.get("id")
        problem = _request_problem(message)
        if problem is not None:
            if "id" in message:  # a malformed notification cannot be answered, only dropped
                error = JsonRpcError(INVALID_REQUEST, f"Invalid request: {problem}.")
                await self._reply_error(request_id if _valid_id(request_id) else None, error)
            return
        method, params = message["method"], message.get("params")
        if _valid_id(request_id):
            task = asyncio.create_task(self._serve(request_id, method, params), name=f"{self._name}-{method}")
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        else:
            await self._handle_notification(method, params)

    async def _handle_notification(self, method: str, params: Any) -> None:
        handler = self._notifications.get(method)
        if handler is None:
            logger.debug("%s: ignoring notification %s (no handler)", self._name, method)
            return
        try:
            result = handler(params)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("%s: handling notification %s failed", self._name, method)

    async def _serve(self, request_id: RequestId, method: str, params: Any) -> None:
        """Run one incoming request's handler and answer with its result or error."""
        handler = self._requests.get(method)
        try:
            if handler is None:
                raise JsonRpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})
            result = await handler(params)
        except JsonRpcError as exc:
            await self._reply_error(request_id, exc)
            return
        except Exception as exc:
            logger.exception("%s: handling request %s failed", self._name, method)
            await self._reply_error(
                request_id, JsonRpcError(INTERNAL_ERROR, "Internal error", {"details": str(exc)})
            )
            return
        await self._send_quietly({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _receive_response(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        future = self._pending.pop(request_id, None) if _valid_id(request_id) else None
        if future is None:
            # A late answer to a call its caller gave up on, or an unsolicited id: nobody is waiting.
            logger.debug("%s: ignoring a response with unknown id %r", self._name, request_id)
            return
        if future.done():
            return
        if "error" in message:
            error = message["error"]
            if (
                isinstance(error, dict)
                and _is_int(error.get("code"))
                and isinstance(error.get("message"), str)
            ):
                future.set_exception(JsonRpcError(error["code"], error["message"], error.get("data")))
            else:
                future.set_exception(
                    ProtocolViolation(f"The peer sent a malformed error object: {error!r:.200}")
                )
        elif "result" in message:
            future.set_result(message["result"])
        else:
            future.set_exception(ProtocolViolation("The peer sent a response with neither result nor error."))

    # -- helpers --------------------------------------------------------------------------------------

    async def _reply_error(self, request_id: RequestId | None, error: JsonRpcError) -> None:
        await self._send_quietly({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})

    async def _send_quietly(self, message: dict[str, Any]) -> None:
        """Answer the peer unless it is gone: an answer nobody can read is not an error of ours."""
        if self._closed:
            return
        try:
            await self._transport.send(message)
        except (ConnectionError, OSError) as exc:
            logger.debug("%s: could not answer the peer: %r", self._name, exc)

    def _end(self, reason: str) -> None:
        """Mark the stream ended and fail every outstanding call with `reason`."""
        if self._ended.is_set():
            return
        self._end_reason = reason
        self._ended.set()
        pending = list(self._pending.values())
        self._pending.clear()
        for future in pending:
            if not future.done():
                future.set_exception(ConnectionClosed(reason))

    def _raise_if_ended(self) -> None:
        if self._receiver is None and not self._closed:
            raise ConnectionClosed(self._end_reason)
        if self._ended.is_set():
            raise ConnectionClosed(self._end_reason)


def _message(method: str, params: Any, *, request_id: RequestId | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not None:
        message["id"] = request_id
    message["method"] = method
    if params is not None:
        message["params"] = params
    return message


def _request_problem(message: dict[str, Any]) -> str | None:
    """What makes a request or notification invalid JSON-RPC, or None when it is valid."""
    if "id" in message and not _valid_id(message["id"]):
        return "the id must be a string or an integer"
    method = message["method"]
    if not isinstance(method, str) or not method:
        return "the method must be a non-empty string"
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        return "params must be an object or an array"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _valid_id(value: Any) -> TypeGuard[RequestId]:
    """JSON-RPC ids are strings or integers (a bool is not, though Python's `True == 1`)."""
    return isinstance(value, str) or _is_int(value)
