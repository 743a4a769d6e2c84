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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

_MAX_BODY = 16 * 1024 * 1024
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class ScriptedToolCall(BaseModel):
    """A tool call the fake model makes; ``arguments`` may be an object or a raw (even broken) string."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class Reply(BaseModel):
    """One scripted answer. Fields combine: reasoning, then text, then tool calls.

    ``text=None`` echoes the last user message. ``chunks`` splits the text into that many
    deltas (default: one per word). ``status`` answers with an HTTP error instead.
    ``delay`` waits before the response headers, ``chunk_delay`` between chunks.
    ``break_after`` drops the connection after that many chunks; ``garbage_after`` sends a
    line that is not JSON after that many chunks.
    """

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    chunks: int | None = None
    reasoning: str | None = None
    reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    status: int | None = None
    error_message: str | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    break_after: int | None = None
    garbage_after: int | None = None
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    retry_after_ms: int | None = None


@dataclass
class RecordedRequest:
    """What a client sent: kept so tests can assert on messages, tools and generation options."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class _HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _ClientGone(Exception):
    """The peer closed the connection (or sent something we cannot read)."""


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
        try:
            while True:
                request = await _read_request(reader)
                keep_alive = await self._dispatch(request, writer)
                if not keep_alive or request.headers.get("connection", "").lower() == "close":
                    break
        except (_ClientGone, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _dispatch(self, request: _HttpRequest, writer: asyncio.StreamWriter) -> bool:
        """Route one request; returns whether the connection may serve another."""
        path = request.path.split("?", 1)[0].rstrip("/")
        if path.startswith("/_"):
            return await self._admin(request, path, writer)
        body = _decode_json(request.body)
        self.requests.append(RecordedRequest(request.method, path, request.headers, body))
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            await _send_error(writer, 401, "Incorrect API key provided.")
            return True
        if request.method == "GET" and path.endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
            await _send_json(writer, 200, {"object": "list", "data": data})
            return True
        if request.method == "POST" and path.endswith("/chat/completions"):
            if not isinstance(body, dict):
                await _send_error(writer, 400, "The request body is not a JSON object.")
                return True
            return await self._chat(body, writer)
        await _send_error(writer, 404, f"No route for {request.method} {path}.")
        return True

    async def _admin(self, request: _HttpRequest, path: str, writer: asyncio.StreamWriter) -> bool:
        if path == "/_requests":
            await _send_json(writer, 200, {"requests": [r.body for r in self.requests]})
        elif path == "/_reset" and request.method == "POST":
            self.reset()
            await _send_json(writer, 200, {"ok": True})
        elif path == "/_script" and request.method == "POST":
            try:
                self._apply_script(_decode_json(request.body))
            except (ValueError, TypeError) as exc:
                await _send_error(writer, 400, f"Bad script: {exc}")
                return True
            await _send_json(writer, 200, {"ok": True, "queued": len(self.replies)})
        else:
            await _send_error(writer, 404, f"No route for {request.method} {path}.")
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
            await _send_error(writer, reply.status, message, headers)
            return True
        self._counter += 1
        completion = _Completion(
            id=f"chatcmpl-fake-{self._counter}",
            model=str(body.get("model", "fake-model")),
            reply=reply,
            text=_reply_text(reply, body),
        )
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await _stream(writer, completion, include_usage)
        await _send_json(writer, 200, completion.whole())
        return True


@dataclass
class _Completion:
    """Builds the chunks (or the whole object) of one scripted answer."""

    id: str
    model: str
    reply: Reply
    text: str
    created: int = field(default_factory=lambda: int(time.time()))

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def finish_reason(self) -> str:
        if self.reply.finish_reason:
            return self.reply.finish_reason
        return "tool_calls" if self.reply.tool_calls else "stop"

    def usage(self) -> dict[str, int]:
        if self.reply.usage is not None:
            return self.reply.usage
        completion = max(1, len(self.text.split()) + len(self.reply.tool_calls))
        return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}

    def tool_calls(self) -> list[dict[str, Any]]:
        calls = []
        for index, call in enumerate(self.reply.tool_calls):
            arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            calls.append(
                {
                    "id": call.id or f"call_{self.id[-6:]}_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments},
                }
            )
        return calls

    def chunks(self) -> list[dict[str, Any]]:
        """The stream's data objects, in order, without the usage chunk."""
        out = [self._chunk({"role": "assistant", "content": ""})]
        if self.reply.reasoning:
            field_name = self.reply.reasoning_field
            out += [self._chunk({field_name: piece}) for piece in _split(self.reply.reasoning, None)]
        out += [self._chunk({"content": piece}) for piece in _split(self.text, self.reply.chunks)]
        for index, call in enumerate(self.tool_calls()):
            head = {"index": index, "id": call["id"], "type": "function"}
            head["function"] = {"name": call["function"]["name"], "arguments": ""}
            out.append(self._chunk({"tool_calls": [head]}))
            # Arguments arrive in fragments, as real servers send them.
            for piece in _fragments(call["function"]["arguments"], 3):
                out.append(self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        out.append(self._chunk({}, self.finish_reason()))
        return out

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.reply.tool_calls:
            message["tool_calls"] = self.tool_calls()
        if self.reply.reasoning:
            message[self.reply.reasoning_field] = self.reply.reasoning
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason()}],
            "usage": self.usage(),
        }


def _reply_text(reply: Reply, body: dict[str, Any]) -> str:
    if reply.text is not None:
        return reply.text
    if reply.tool_calls:
        return ""
    return f"You said: {_last_user_text(body.get('messages'))}"


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _split(text: str, count: int | None) -> list[str]:
    """Split text into deltas: one per word (keeping spaces), or ``count`` near-equal pieces."""
    if not text:
        return []
    if count is None:
        words = text.split(" ")
        return [w + " " for w in words[:-1]] + ([words[-1]] if words[-1] else [])
    return _fragments(text, count)


def _fragments(text: str, count: int) -> list[str]:
    if not text:
        return []
    count = max(1, min(count, len(text)))
    size, extra = divmod(len(text), count)
    pieces, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


async def _stream(writer: asyncio.StreamWriter, completion: _Completion, include_usage: bool) -> bool:
    """Send the answer as SSE over chunked transfer encoding; False when the connection was dropped."""
    reply = completion.reply
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    lines = [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in completion.chunks()]
    if include_usage:
        usage_chunk = {**completion._chunk({}), "choices": [], "usage": completion.usage()}
        lines.append(b"data: " + json.dumps(usage_chunk).encode() + b"\n\n")
    lines.append(b"data: [DONE]\n\n")
    for index, line in enumerate(lines):
        if reply.break_after is not None and index >= reply.break_after:
            await writer.drain()
            writer.transport.abort()
            return False
        if reply.garbage_after is not None and index == reply.garbage_after:
            writer.write(_chunked(b"data: {this is not json\n\n"))
        writer.write(_chunked(line))
        if reply.chunk_delay and index > 0:  # the role chunk goes out with the headers
            await writer.drain()
            await asyncio.sleep(reply.chunk_delay)
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _read_request(reader: asyncio.StreamReader) -> _HttpRequest:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise _ClientGone from exc
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2:
        raise _ClientGone
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length > _MAX_BODY:
        raise _ClientGone
    body = await reader.readexactly(length) if length else b""
    return _HttpRequest(parts[0].upper(), parts[1], headers, body)


def _decode_json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


async def _send_json(
    writer: asyncio.StreamWriter, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(payload).encode()
    reason = _REASONS.get(status, "Error")
    extra = "".join(f"{key}: {value}\r\n" for key, value in (headers or {}).items())
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(data)}\r\n{extra}\r\n".encode()
        + data
    )
    await writer.drain()


async def _send_error(
    writer: asyncio.StreamWriter, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    error_type = _ERROR_TYPES.get(status, "server_error")
    body = {"error": {"message": message, "type": error_type, "code": None}}
    await _send_json(writer, status, body, headers)


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
