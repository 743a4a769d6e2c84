"""A scriptable OpenAI-compatible chat-completions server, for tests, demos and benchmarks.

It is the "outside world" our tests fake: the real ``openai`` client talks to it over real
HTTP on a loopback port, so the provider code is exercised exactly as in production.
Plain asyncio and the standard library (plus pydantic for the script format), no Django.

Endpoints:
- ``GET /v1/models``: the configured model ids.
- ``POST /v1/chat/completions``: streaming (SSE, chunked) and non-streaming answers.
  Each request takes the next scripted :class:`Reply` from the queue; with an empty queue
  it uses :attr:`FakeLLMServer.default` (by default: echo the last user message).
- ``POST /_script`` (admin, for a server in another process): ``{"replies": [REPLY, ...],
  "default": REPLY?, "reset": bool?}`` appends replies (and replaces the default).
- ``GET /_requests``: every recorded request body; ``POST /_reset`` clears replies and records.

Every request to ``/v1/*`` is recorded (:attr:`FakeLLMServer.requests`), so tests can assert
on the messages and tools the model was offered.

This module is the server (routing, scripting, recording) and the way to reach it from another
process; the script format and how a reply is answered (whole or streamed) are in
``fake_llm_replies``, the bit of HTTP it speaks in ``fake_llm_http``. Import everything from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from agentsite.dev.fake_llm_http import (
    ClientGone,
    HttpRequest,
    decode_json,
    read_request,
    send_error,
    send_json,
)
from agentsite.dev.fake_llm_replies import Completion, Reply, ScriptedToolCall, reply_text, stream_completion

__all__ = [
    "FakeLLMServer",
    "RecordedRequest",
    "Reply",
    "ScriptedToolCall",
    "remote_requests",
    "script_remote",
    "serve",
]

logger = logging.getLogger(__name__)


@dataclass
class RecordedRequest:
    """What a client sent: kept so tests can assert on messages, tools and generation options."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class FakeLLMServer:
    """The server object tests hold: script it, start it, read what it received."""

    host: str = "127.0.0.1"
    port: int = 0
    models: list[str] = field(default_factory=lambda: ["fake-model", "fake-model-large"])
    api_key: str | None = None
    default: Reply = field(default_factory=Reply)
    replies: list[Reply] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)
    _counter: int = 0
    connections: int = 0  # TCP connections accepted (a client that keeps them alive opens one)

    # -- scripting -------------------------------------------------------------------------

    def script(self, *replies: Reply | dict[str, Any]) -> None:
        """Queue replies for the next chat requests, in order."""
        self.replies.extend(r if isinstance(r, Reply) else Reply.model_validate(r) for r in replies)

    def reset(self) -> None:
        self.replies.clear()
        self.requests.clear()
        self.default = Reply()

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat-completions requests received, oldest first."""
        return [
            r.body for r in self.requests if r.path.endswith("/chat/completions") and isinstance(r.body, dict)
        ]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> FakeLLMServer:
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and end every open connection: no task is left behind."""
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> FakeLLMServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    # -- HTTP ------------------------------------------------------------------------------

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        try:
            while True:
                request = await read_request(reader)
                keep_alive = await self._dispatch(request, writer)
                if not keep_alive or request.headers.get("connection", "").lower() == "close":
                    break
        except (ClientGone, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _dispatch(self, request: HttpRequest, writer: asyncio.StreamWriter) -> bool:
        """Route one request; returns whether the connection may serve another."""
        path = request.path.split("?", 1)[0].rstrip("/")
        if path.startswith("/_"):
            return await self._admin(request, path, writer)
        body = decode_json(request.body)
        self.requests.append(RecordedRequest(request.method, path, request.headers, body))
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            await send_error(writer, 401, "Incorrect API key provided.")
            return True
        if request.method == "GET" and path.endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
            await send_json(writer, 200, {"object": "list", "data": data})
            return True
        if request.method == "POST" and path.endswith("/chat/completions"):
            if not isinstance(body, dict):
                await send_error(writer, 400, "The request body is not a JSON object.")
                return True
            return await self._chat(body, writer)
        await send_error(writer, 404, f"No route for {request.method} {path}.")
        return True

    async def _admin(self, request: HttpRequest, path: str, writer: asyncio.StreamWriter) -> bool:
        if path == "/_requests":
            await send_json(writer, 200, {"requests": [r.body for r in self.requests]})
        elif path == "/_reset" and request.method == "POST":
            self.reset()
            await send_json(writer, 200, {"ok": True})
        elif path == "/_script" and request.method == "POST":
            try:
                self._apply_script(decode_json(request.body))
            except (ValueError, TypeError) as exc:
                await send_error(writer, 400, f"Bad script: {exc}")
                return True
            await send_json(writer, 200, {"ok": True, "queued": len(self.replies)})
        else:
            await send_error(writer, 404, f"No route for {request.method} {path}.")
        return True

    def _apply_script(self, payload: Any) -> None:
        """Apply a ``/_script`` body: a list of replies, or an object with replies/default/reset."""
        if isinstance(payload, list):
            payload = {"replies": payload}
        if not isinstance(payload, dict):
            raise TypeError("expected a JSON object or list")
        replies = [Reply.model_validate(item) for item in payload.get("replies", [])]
        default = Reply.model_validate(payload["default"]) if "default" in payload else None
        if payload.get("reset"):
            self.reset()
        self.replies.extend(replies)
        if default is not None:
            self.default = default

    async def _chat(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        reply = self.replies.pop(0) if self.replies else self.default
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status is not None and reply.status >= 400:
            message = reply.error_message or f"Scripted error {reply.status}."
            headers = (
                {"retry-after-ms": str(reply.retry_after_ms)} if reply.retry_after_ms is not None else {}
            )
            await send_error(writer, reply.status, message, headers)
            return True
        self._counter += 1
        completion = Completion(
            id=f"chatcmpl-fake-{self._counter}",
            model=str(body.get("model", "fake-model")),
            reply=reply,
            text=reply_text(reply, body),
        )
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await stream_completion(writer, completion, include_usage)
        await send_json(writer, 200, completion.whole())
        return True


async def serve(host: str = "127.0.0.1", port: int = 8001, *, server: FakeLLMServer | None = None) -> None:
    """Run a fake LLM server until cancelled (``manage.py fake_llm`` calls this)."""
    server = server or FakeLLMServer(host=host, port=port)
    server.host, server.port = host, port
    await server.start()
    # One line on stdout, so a process that started us with --port 0 can learn the address.
    print(f"fake LLM listening on {server.base_url}", flush=True)
    try:
        await server.serve_forever()
    finally:
        await server.stop()


def script_remote(base_url: str, *replies: Reply | dict[str, Any], default: Reply | None = None) -> None:
    """Queue replies on a fake LLM server in another process (``POST /_script``). Blocking."""
    payload: dict[str, Any] = {
        "replies": [r.model_dump(exclude_defaults=True) if isinstance(r, Reply) else r for r in replies]
    }
    if default is not None:
        payload["default"] = default.model_dump(exclude_defaults=True)
    _admin_call(base_url, "/_script", payload)


def remote_requests(base_url: str) -> list[Any]:
    """Bodies of every request a fake LLM server in another process received. Blocking."""
    return list(_admin_call(base_url, "/_requests", None)["requests"])


def _admin_call(base_url: str, path: str, payload: Any) -> Any:
    url = base_url.removesuffix("/").removesuffix("/v1") + path
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def main() -> None:  # pragma: no cover - thin CLI wrapper
    """``python -m agentsite.dev.fake_llm [--host H] [--port N]``: the same server without Django."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":  # pragma: no cover
    main()
