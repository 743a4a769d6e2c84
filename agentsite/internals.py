"""Speed tricks that reach into private parts of asgiref and Channels: all of them, here.

Each one is a measured win (bench/README.md) and each relies on something its library does not promise,
so tests/test_internals.py fails loudly when a private name it uses is gone, and pyproject.toml pins the
versions they were written against (upper bounds: an upgrade is a decision, not an accident).

1. The database thread (agentsite/db.py): our async code hands its ORM calls to asgiref's one shared
   database thread in batches, and keeps that thread's connection open. It uses asgiref's executor for
   that thread, binds the thread to our event loop the way asgiref's own thread handler does, and reads
   the signs by which asgiref would pick another thread (a sync caller waiting in `async_to_sync`, a
   request's thread-sensitive context). Measured: 130–181 → 34–42 µs of server CPU per frame, with the
   lean socket below.
2. The lean chat socket (chat/consumers.py): Channels' `AsyncConsumer.__call__` without its per-socket
   channel-layer channel and receive task, `dispatch` without `close_old_connections` before every frame
   (a thread hand-over, and a reconnect with CONN_MAX_AGE=0), and frames sent straight to the server's
   own `send` (kept in the scope by agentsite/ws_auth.py) instead of through the middleware wrappers.
   Measured: ~30 KB less per idle socket, 40–90 µs less per frame.
3. Closing sockets with the codes the contract names (agentsite/management/commands/serve.py): daphne
   builds its WebSocket factory inside `Server.run()` with autobahn's default `failByDrop=True`, which
   drops the TCP connection of a frame over the size limit instead of closing it with 1009 as
   docs/protocol.md §3.2 promises; and autobahn lets an application close only with 1000 or 3000–4999,
   not with 1012 ("service restart": reconnect), which a server may send (RFC 6455 §7.4, IANA registry).
   `serve` gives daphne a factory whose sockets do both.
4. One thread hop per HTTP request (agentsite/asgi.py): Django's ASGI handler runs its middleware chain in
   async mode, and each `MiddlewareMixin` middleware (nine of ours) then hands its `process_request` and
   `process_response` to the request's thread one at a time — two hand-overs each, and more where a
   sync-only middleware sits between async ones. `OneHopASGIHandler` builds the chain in sync mode, as
   Django's WSGI handler does, and runs chain and view in one hand-over to the request's thread: the same
   middlewares in the same order (CSRF, sessions, authentication as for every browser request), the same
   thread for the view and the connection clean-up. Uses BaseHandler's `load_middleware(is_async=False)`
   and `get_response`, which Django's own handlers call but does not document for subclasses.
   Measured: see bench/README.md (issue 18, opening a chat).
5. No debug work on a socket's handshake (agentsite/management/commands/serve.py): autobahn's
   `_connectionMade` formats its ~30 protocol options with `pprint.pformat` for a debug log line on every
   new socket, also when nothing logs at debug level. `serve` replaces the module's `pformat` with one that
   formats only while txaio's log level shows debug lines.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import txaio
from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from autobahn.websocket import protocol as autobahn_protocol
from channels import consumer as channels_consumer
from channels import utils as channels_utils
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from daphne import server as daphne_server
from daphne import ws_protocol as daphne_ws_protocol
from django.core.handlers import base as django_handlers
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase

# What the tricks use that their libraries do not promise: (owner, attribute).
PRIVATE_NAMES: tuple[tuple[Any, str], ...] = (
    (SyncToAsync, "single_thread_executor"),
    (SyncToAsync, "threadlocal"),
    (SyncToAsync, "thread_sensitive_context"),
    (AsyncToSync, "executors"),
    (AsyncToSync, "loop_thread_executors"),
    (channels_utils, "await_many_dispatch"),
    (channels_consumer, "get_handler_name"),
    (daphne_server, "WebSocketFactory"),
    (daphne_ws_protocol.WebSocketProtocol, "serverClose"),
    (daphne_ws_protocol.WebSocketProtocol, "sendCloseFrame"),
    (django_handlers.BaseHandler, "load_middleware"),
    (django_handlers.BaseHandler, "get_response"),
    (ASGIHandler, "get_response_async"),
    (autobahn_protocol, "pformat"),
)

SERVER_SEND = "agentsite.send"  # scope key: the server's own `send`, without middleware wrappers around it


def missing() -> list[str]:
    """The private names that are gone (empty while every trick still works)."""
    return [
        f"{getattr(owner, '__name__', owner)}.{name}"
        for owner, name in PRIVATE_NAMES
        if not hasattr(owner, name)
    ]


# -- 1. the database thread ---------------------------------------------------------------------------


def run_in_database_thread(fn: Callable[[], None]) -> None:
    """Submit `fn` to asgiref's single shared database thread."""
    SyncToAsync.single_thread_executor.submit(fn)


def bind_thread_to(loop: asyncio.AbstractEventLoop) -> None:
    """In the database thread: what asgiref's thread handler sets, so that `async_to_sync` inside a call
    finds our event loop."""
    SyncToAsync.threadlocal.main_event_loop = loop
    SyncToAsync.threadlocal.main_event_loop_pid = os.getpid()


def asgiref_picks_another_thread(loop: asyncio.AbstractEventLoop) -> bool:
    """asgiref's rules that pick a thread other than the shared one: a sync caller waiting in async_to_sync
    (its thread, and its transaction, e.g. a test's), or a request's ThreadSensitiveContext."""
    return (
        getattr(AsyncToSync.executors, "current", None) is not None
        or SyncToAsync.thread_sensitive_context.get(None) is not None
        or loop in AsyncToSync.loop_thread_executors
    )


# -- 2. the lean chat socket ----------------------------------------------------------------------------


class LeanWebsocketConsumer(AsyncWebsocketConsumer):
    """An AsyncWebsocketConsumer without a channel-layer channel, without a database clean-up per frame,
    that sends frames straight to the server (see the module docstring)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        self.channel_layer = None
        self.base_send = send
        self._send_raw = scope.get(SERVER_SEND, send)
        try:
            await channels_utils.await_many_dispatch([receive], self.dispatch)
        except StopConsumer:
            pass

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, channels_consumer.get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        await self.disconnect(message["code"])
        raise StopConsumer()

    async def send_text(self, text: str) -> None:
        await self._send_raw({"type": "websocket.send", "text": text})


# -- 3. closing sockets with the codes the contract names ------------------------------------------------

SERVER_CLOSE_CODES = frozenset({1001, 1011, 1012, 1013})  # besides 1000 and 3000–4999, which autobahn allows


class ContractWebSocketProtocol(daphne_ws_protocol.WebSocketProtocol):  # type: ignore[misc]
    """daphne's socket, but the application may also close with the codes a server sends (1012)."""

    def serverClose(self, code: int | None = None) -> None:
        if code in SERVER_CLOSE_CODES:
            self.sendCloseFrame(code=code, isReply=False)  # what autobahn's sendClose does after its check
        else:
            super().serverClose(code)


class ContractWebSocketFactory(daphne_server.WebSocketFactory):  # type: ignore[misc]
    """daphne's factory, with ContractWebSocketProtocol, and a failed connection (a frame over the limit:
    1009) gets its close frame."""

    protocol = ContractWebSocketProtocol

    def resetProtocolOptions(self) -> None:
        super().resetProtocolOptions()
        self.failByDrop = False


def close_websockets_by_contract() -> None:
    """Make the next daphne Server built in this process use ContractWebSocketFactory."""
    daphne_server.WebSocketFactory = ContractWebSocketFactory
    autobahn_protocol.pformat = _pformat_for_debug_only  # 5. below


# -- 5. no debug work on a socket's handshake --------------------------------------------------------------

_pformat = autobahn_protocol.pformat
_DEBUG_LEVELS = frozenset({"debug", "trace"})


def _pformat_for_debug_only(value: Any) -> str:
    """autobahn's `pformat`, only when its debug lines are shown (they are its only use on a server)."""
    if txaio.get_global_log_level() in _DEBUG_LEVELS:
        return str(_pformat(value))
    return "(shown at log level debug)"


# -- 4. one thread hop per HTTP request ------------------------------------------------------------------


class OneHopASGIHandler(ASGIHandler):
    """Django's ASGI handler with its middleware chain in sync mode, run with the view in one hand-over to
    the request's thread (see the module docstring). An async view still works: Django's sync path runs it
    with async_to_sync, as under WSGI."""

    def __init__(self) -> None:
        django_handlers.BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
