"""Speed tricks that reach into private parts of asgiref, Channels, daphne, autobahn, Django and openai: all
of them, here.

Each one is a measured win (bench/README.md) and each relies on something its library does not promise:
agentsite/private_names.py lists every such name, tests/test_internals.py fails loudly (naming the
package, its version and the trick) when one is gone or changed, and pyproject.toml pins the versions
they were written against (upper bounds: an upgrade is a decision, not an accident). All of them are
off, and this module is not even imported, on the stock stack (AGENTSITE_STOCK_STACK=1, agentsite/stack.py):
the libraries' plain path then runs, e.g. after an upgrade until the tricks are checked again.

1. The database thread (agentsite/db.py): our async code hands its ORM calls to asgiref's one shared
   database thread in batches, and keeps that thread's connection open. It uses asgiref's executor for
   that thread, binds the thread to our event loop the way asgiref's own thread handler does, and reads
   the signs by which asgiref would pick another thread (a sync caller waiting in `async_to_sync`, a
   request's thread-sensitive context). Measured: 130–181 → 34–42 µs of server CPU per frame, with the
   lean socket below.
2. The lean chat socket (chat/consumers.py): Channels' `AsyncConsumer.__call__` without its per-socket
   channel-layer channel and receive task, `dispatch` without `close_old_connections` before every frame
   (a thread hand-over, and a reconnect with CONN_MAX_AGE=0), and frames sent straight to the server's
   own `send` (kept in the scope by accounts/ws_auth.py) instead of through the middleware wrappers.
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
   sync-only middleware sits between async ones; `request_started` and `request_finished` take a hand-over
   each, and every request gets a new thread (its `ThreadSensitiveContext`) and so a new database
   connection. `OneHopASGIHandler` builds the chain in sync mode, as Django's WSGI handler does, and runs
   `request_started`, chain, view and (unless the response is streamed) the response's close in one
   hand-over to a thread of its own pool: the same middlewares in the same order (CSRF, sessions,
   authentication as for every browser request), the same thread for the view and the connection
   clean-up. Uses BaseHandler's `load_middleware(is_async=False)` and `get_response`, and ASGIHandler's
   `read_body`, `create_request`, `send_response` and `listen_for_disconnect`, which Django's own handlers
   call but does not document for subclasses. Measured: see bench/README.md (issue 18, opening a chat).
5. No debug work on a socket's handshake (agentsite/management/commands/serve.py): autobahn's
   `_connectionMade` formats its ~30 protocol options with `pprint.pformat` for a debug log line on every
   new socket, also when nothing logs at debug level. `serve` replaces the module's `pformat` with one that
   formats only while txaio's log level shows debug lines.
6. The streamed chat request of a provider, built once (agents/llm.py): the openai SDK builds and sends
   every request through its generic machinery — options models copied twice, the body's transform, header
   merging, an auth flow, its retry loop — ~1 ms of CPU per reply on this machine, more than the reply's 50
   chunks cost. `SdkStreamRequest` asks the SDK once for the URL, headers and timeout it would send, then
   sends each body (JSON bytes) with the SDK's own httpx client, and on a failure follows the SDK's own
   rules: its retry decision (`_should_retry`), its back-off (`_calculate_retry_timeout`), its errors
   (`_make_status_error_from_response`, APITimeoutError, APIConnectionError). A client whose auth is more
   than a static key (the SDK's refreshable credentials) keeps the SDK's path.
7. A burst of frames in one write (chat/consumers.py): each frame sent through daphne goes through its ASGI
   `send`, its protocol's checks, autobahn's `sendMessage` and `sendFrame` (with a debug line's arguments
   formatted per frame) and one `transport.write`. `LeanWebsocketConsumer.send_texts` builds the frames of
   a burst itself — unmasked, uncompressed, unfragmented text frames, byte for byte what autobahn writes
   (tests/test_internals.py compares them) — and hands them to Twisted in one write, while daphne's
   socket is open and autobahn would do exactly that (no compression, no fragmentation, nothing queued,
   within the size limit); otherwise each frame goes the usual way.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import Any

import txaio
from asgiref.sync import AsyncToSync, SyncToAsync
from autobahn.websocket import protocol as autobahn_protocol
from channels import consumer as channels_consumer
from channels import utils as channels_utils
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from daphne import server as daphne_server
from daphne import ws_protocol as daphne_ws_protocol
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base as django_handlers
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix

from agentsite.stack import SERVER_SEND  # scope key: the server's own `send`, without wrappers around it

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

    async def send_texts(self, texts: Sequence[str]) -> None:
        """Several text frames, in order: in one write to the socket when it can take them (trick 7)."""
        if len(texts) > 1 and write_text_frames(self._send_raw, texts):
            return
        for text in texts:
            await self.send_text(text)


# -- 7. a burst of frames in one write --------------------------------------------------------------------

_OPEN = daphne_ws_protocol.WebSocketProtocol.STATE_OPEN
_LENGTH_16 = 0xFFFF


def _text_frame(payload: bytes) -> bytes:
    """A final, unmasked text frame (RFC 6455 §5.2), as autobahn's `sendFrame` builds it for a server."""
    size = len(payload)
    if size <= 125:
        return b"\x81" + size.to_bytes(1, "big") + payload
    if size <= _LENGTH_16:
        return b"\x81\x7e" + size.to_bytes(2, "big") + payload
    return b"\x81\x7f" + size.to_bytes(8, "big") + payload


def write_text_frames(send: Any, texts: Sequence[str]) -> bool:
    """Write `texts` as text frames in one go on the daphne socket behind `send` (the server's own `send`,
    `functools.partial(Server.handle_reply, protocol)`). False, with nothing written, when the socket is not
    one autobahn would write them to as they are: then the caller sends them one by one."""
    if not isinstance(send, functools.partial) or not send.args:
        return False
    protocol = send.args[0]
    if not isinstance(protocol, daphne_ws_protocol.WebSocketProtocol) or protocol.state != _OPEN:
        return False
    # autobahn's per-connection settings (copied from its factory when the connection is made); a name that
    # is gone counts as "not as assumed", and the frames go the usual way.
    settings_as_assumed = (
        getattr(protocol, "transport", None) is not None
        and getattr(protocol, "_perMessageCompress", True) is None
        and not getattr(protocol, "send_queue", True)
        and getattr(protocol, "autoFragmentSize", 1) == 0
        and getattr(protocol, "logFrames", True) is False
        and getattr(protocol, "logOctets", True) is False
        and not getattr(protocol, "trackedTimings", True)
        and getattr(protocol.factory, "maskServerFrames", True) is False
    )
    if not settings_as_assumed:
        return False
    payloads = [text.encode("utf-8") for text in texts]
    limit = getattr(protocol, "maxMessagePayloadSize", 0)
    if limit and any(len(payload) > limit for payload in payloads):
        return False  # autobahn refuses it: let it, as before
    protocol.transport.write(b"".join([_text_frame(payload) for payload in payloads]))
    return True


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
    autobahn_protocol.pformat = _pformat_for_debug_only  # type: ignore[assignment]  # 5. below


# -- 5. no debug work on a socket's handshake --------------------------------------------------------------

_pformat = autobahn_protocol.pformat
_DEBUG_LEVELS = frozenset({"debug", "trace"})


def _pformat_for_debug_only(value: Any) -> str:
    """autobahn's `pformat`, only when its debug lines are shown (they are its only use on a server)."""
    if txaio.get_global_log_level() in _DEBUG_LEVELS:  # type: ignore[attr-defined]
        return str(_pformat(value))
    return "(shown at log level debug)"


# -- 4. one thread hop per HTTP request ------------------------------------------------------------------


class OneHopASGIHandler(ASGIHandler):
    """Django's ASGI handler with a request's whole sync part in one hand-over to a thread of its own pool
    (see the module docstring): `request_started`, the middleware chain in sync mode with the view, and —
    for a response that is not streamed — its `close()` (`request_finished`, the connection clean-up), in
    the same thread, as under WSGI. An async view still works: Django's sync path runs it with async_to_sync.
    A streamed response (SSE, files) is sent from the event loop and closed in the pool afterwards.

    At most `threads` requests run their sync part at once (the others wait their turn, in order), in
    threads that are reused: Django's handler starts a thread (and, per thread, a database connection) for
    every request in flight, and 200 at once cost ~50 MB of memory and the GIL's hand-overs between them
    without serving any faster."""

    def __init__(self, threads: int = 32) -> None:
        django_handlers.BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="request")

    def _in_pool[**P, R](self, fn: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
        return SyncToAsync(fn, thread_sensitive=False, executor=self._pool)  # type: ignore[return-value]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        # No ThreadSensitiveContext (a new thread per request): the sync part runs in the pool.
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        with closing(body_file):
            set_script_prefix(get_script_prefix(scope))
            response: HttpResponseBase | None = None
            try:  # as Django's handler: a client that goes away mid-request ends the wait (RequestAborted)
                async with asyncio.TaskGroup() as group:
                    listening = group.create_task(self.listen_for_disconnect(receive))
                    response = await self._in_pool(self._serve)(scope, body_file)
                    await self.send_response(response, send)
                    listening.cancel()
            except* RequestAborted:
                pass
            if response is None:
                await signals.request_finished.asend(sender=self.__class__)
            elif response.streaming:
                await self._in_pool(response.close)()

    def _serve(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None  # create_request answers one or the other
            response: HttpResponseBase = error_response
        else:
            response = self.get_response(request)
            response._handler_class = self.__class__  # type: ignore[attr-defined]
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        if not response.streaming:
            response.close()  # request_finished here, in the thread that served the request
        return response


# -- 6. the streamed chat request of a provider, built once ----------------------------------------------


class SdkStreamRequest:
    """POSTs JSON bodies to one path of an openai SDK client and returns the streamed httpx response,
    as the SDK's `with_streaming_response` would (see the module docstring): same URL, headers, timeout
    and client; same retries and errors. Sync-free and cheap per call once `prepare` has run."""

    def __init__(self, client: Any, path: str) -> None:
        self._sdk = client
        self._path = path
        # (request class, URL, headers, extensions, options) as the SDK builds them for this path
        self._prepared: tuple[Any, Any, dict[str, str], dict[str, Any], Any] | None = None

    @staticmethod
    def usable(client: Any) -> bool:
        """Only for a static key: the SDK refreshes other credentials per request."""
        return client.custom_auth is None and isinstance(client.api_key, str)

    async def _prepare(self) -> tuple[Any, Any, dict[str, str], dict[str, Any], Any]:
        if self._prepared is None:
            from openai._models import FinalRequestOptions

            options = FinalRequestOptions.construct(method="post", url=self._path, json_data={})
            options = await self._sdk._prepare_options(options)
            template = self._sdk._build_request(options, retries_taken=0)
            headers = {k: v for k, v in template.headers.items() if k.lower() != "content-length"}
            # The client's own headers are merged in already: requests are made with the class alone.
            self._prepared = (type(template), template.url, headers, dict(template.extensions), options)
        return self._prepared

    async def send(self, body: bytes) -> Any:
        from openai import APIConnectionError, APITimeoutError
        from openai._base_client import request_exceptions, timeout_exceptions

        request_class, url, headers, extensions, options = await self._prepare()
        client = self._sdk
        http = client._client
        max_retries = client.max_retries
        idempotency = getattr(client, "_idempotency_header", None)  # set per client class, if at all
        for retries_taken in range(max_retries + 1):
            remaining = max_retries - retries_taken
            sent = dict(headers)
            sent["x-stainless-retry-count"] = str(retries_taken)
            if idempotency:
                sent[idempotency] = client._idempotency_key()
            request = request_class("POST", url, headers=sent, content=body, extensions=extensions)
            try:
                response = await http.send(request, stream=True)
            except timeout_exceptions() as exc:
                if remaining > 0:
                    await asyncio.sleep(client._calculate_retry_timeout(remaining, options, None))
                    continue
                raise APITimeoutError(request=request) from exc
            except request_exceptions() as exc:
                if remaining > 0:
                    await asyncio.sleep(client._calculate_retry_timeout(remaining, options, None))
                    continue
                raise APIConnectionError(request=request) from exc
            if response.status_code < 400:
                return response
            if remaining > 0 and client._should_retry(response):
                await response.aclose()
                await asyncio.sleep(client._calculate_retry_timeout(remaining, options, response.headers))
                continue
            await response.aread()
            raise client._make_status_error_from_response(response) from None
        raise AssertionError("unreachable: the last attempt returns or raises")
