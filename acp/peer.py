"""ACP's client side on JSON-RPC: typed calls to a runner, typed dispatch of the runner's calls.

`AcpPeer` is to `acp.client` what a protocol binding is to an application: it knows the
method names and message models (`acp.schema`) and nothing of processes, policy or users.
The runner's requests go to a `ClientHandlers` object; params that do not validate are answered
-32602 before any handler sees them, and methods we do not advertise (terminals ...) -32601.

Plain asyncio: no Django.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from acp.jsonrpc import (
    INVALID_PARAMS,
    JsonRpcConnection,
    JsonRpcError,
    MessageTransport,
    RequestHandler,
)
from acp.schema import (
    FS_READ_TEXT_FILE,
    FS_WRITE_TEXT_FILE,
    INITIALIZE,
    SESSION_CANCEL,
    SESSION_NEW,
    SESSION_PROMPT,
    SESSION_REQUEST_PERMISSION,
    SESSION_UPDATE,
    CancelNotification,
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    WireModel,
    WriteTextFileRequest,
    WriteTextFileResponse,
    text_block,
    to_wire,
)

logger = logging.getLogger(__name__)


class ClientHandlers(Protocol):
    """What a runner may ask of us. `session_update` runs inline in arrival order: queue and return."""

    def session_update(self, notification: SessionNotification) -> None: ...

    async def request_permission(self, request: RequestPermissionRequest) -> RequestPermissionResponse: ...

    async def read_text_file(self, request: ReadTextFileRequest) -> ReadTextFileResponse: ...

    async def write_text_file(self, request: WriteTextFileRequest) -> WriteTextFileResponse: ...


class AcpPeer:
    """The runner as seen from the client: `initialize`, `session/new`, `session/prompt`, `session/cancel`.

    Each call returns the parsed response model, or raises what `JsonRpcConnection.request` raises
    (`JsonRpcError`, `ProtocolViolation`, `ConnectionClosed`) or pydantic's `ValidationError` when
    the result is not the message ACP prescribes.
    """

    def __init__(self, transport: MessageTransport, handlers: ClientHandlers, *, name: str = "acp") -> None:
        self._name = name
        self._handlers = handlers
        self.connection = JsonRpcConnection(
            transport,
            requests={
                SESSION_REQUEST_PERMISSION: _serving(RequestPermissionRequest, handlers.request_permission),
                FS_READ_TEXT_FILE: _serving(ReadTextFileRequest, handlers.read_text_file),
                FS_WRITE_TEXT_FILE: _serving(WriteTextFileRequest, handlers.write_text_file),
            },
            notifications={SESSION_UPDATE: self._session_update},
            name=name,
        )

    def start(self) -> None:
        self.connection.start()

    async def close(self) -> None:
        await self.connection.close()

    async def initialize(self, request: InitializeRequest) -> InitializeResponse:
        return await self._request(INITIALIZE, request, InitializeResponse)

    async def new_session(self, cwd: str) -> NewSessionResponse:
        return await self._request(
            SESSION_NEW, NewSessionRequest(cwd=cwd, mcp_servers=[]), NewSessionResponse
        )

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        request = PromptRequest(session_id=session_id, prompt=[text_block(text)])
        return await self._request(SESSION_PROMPT, request, PromptResponse)

    async def cancel(self, session_id: str) -> None:
        await self.connection.notify(SESSION_CANCEL, to_wire(CancelNotification(session_id=session_id)))

    async def _request[M: BaseModel](self, method: str, params: WireModel, response: type[M]) -> M:
        result = await self.connection.request(method, to_wire(params))
        return response.model_validate(result)

    def _session_update(self, params: Any) -> None:
        """Parse and hand on one update; an invalid one is dropped (a notification cannot be refused)."""
        try:
            notification = SessionNotification.model_validate(params)
        except ValidationError as exc:
            logger.warning("%s: dropping an invalid session/update: %s", self._name, exc)
            return
        self._handlers.session_update(notification)


def _serving[M: BaseModel](model: type[M], handler: Callable[[M], Awaitable[BaseModel]]) -> RequestHandler:
    """Adapt a typed handler to the connection: parse the params (invalid → -32602), answer in wire form."""

    async def serve(params: Any) -> Any:
        try:
            request = model.model_validate(params)
        except ValidationError as exc:
            details = exc.errors(include_url=False, include_context=False, include_input=False)
            raise JsonRpcError(INVALID_PARAMS, "Invalid params", {"errors": details}) from None
        return to_wire(await handler(request))

    return serve
