"""Model clients: the protocol the turn loop talks to, and its OpenAI-compatible implementation.

The turn loop only needs a stream of small chunks (text, reasoning, and at the end the
assembled tool calls, finish reason and usage), so that is the whole interface. Providers
(OpenAI, Ollama, vLLM, LM Studio, OpenRouter, ...) all speak the chat-completions API.

Why the raw stream: the ``openai`` SDK builds a pydantic object per streamed chunk (~110 µs
of CPU each on this machine); reading the same SSE lines through
``with_streaming_response`` and ``json.loads`` costs ~35 µs, and splitting the body's bytes into
lines ourselves with orjson for each item less again (bench/README.md, issue 18). We keep the SDK for
what it is good at (request building, auth, retries of the initial request, timeouts, typed HTTP
errors) and parse the lines ourselves. Every failure becomes a :class:`ModelError` whose
message names the provider and the model, because it is shown to the user as is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from agents.endpoints import (
    capped_body,
    guarded_http_client,
    model_ids,
    model_list_failure,
    provider_policy,
    refusal_of,
)
from agentsite.encryption import is_unreadable, unreadable_message
from agentsite.outbound import OutboundPolicy, Resolver

if TYPE_CHECKING:
    import openai


def _sdk() -> Any:
    """The openai SDK, imported on first use: it costs ~38 MB and is not needed until a real provider
    is called (the demo model, cron, ACP and most requests never touch it)."""
    import openai

    return openai


logger = logging.getLogger(__name__)

# Keys of a request body that the turn decides; generation options may not override them.
_RESERVED_KEYS = frozenset({"model", "messages", "tools", "stream", "stream_options", "n"})
_DETAIL_LIMIT = 300


@functools.cache
def _transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeouts, other transport errors) of the HTTP library the installed SDK uses.

    Errors raised while *reading* a streamed body are not wrapped by the SDK, so we catch
    the library's own classes. openai 1.x uses httpx, newer releases httpx2. Looked up when an error
    happens (an `except` expression is evaluated only then): importing them costs ~13 MB.
    """
    timeouts: list[type[BaseException]] = []
    transport: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)
        transport.append(module.StreamError)
    return tuple(timeouts), tuple(transport)


class ModelError(Exception):
    """A model call failed; ``message`` is a sentence for the user naming provider and model."""

    def __init__(self, code: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(slots=True)
class ToolCall:
    """One tool call as the model asked for it; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        """The form an assistant message's ``tool_calls`` entry takes in the chat history."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
class ModelChunk:
    """A piece of a streamed answer.

    Text and reasoning chunks carry ``content`` / ``reasoning``. The stream always ends with
    exactly one chunk with ``done=True`` holding the assembled ``tool_calls``, the
    ``finish_reason`` and the ``usage`` (None when the server reported none).
    """

    content: str = ""
    reasoning: str = ""
    done: bool = False
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


class ModelClient(Protocol):
    """What the turn loop needs from a model provider."""

    provider_name: str

    def stream_chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        generation: dict[str, Any] | None = None,
    ) -> AsyncIterator[ModelChunk]:
        """Stream one answer; raises ModelError (possibly after some chunks) when the call fails."""
        ...

    async def list_models(self) -> list[str]:
        """The model ids the provider offers (the providers "test" endpoint shows them); its ModelError
        never carries any part of a response body (agents/endpoints.py)."""
        ...


class OpenAIModelClient:
    """An OpenAI-compatible provider, through the official SDK (one instance per provider, reused).

    Every connection goes only where the outbound policy allows (`policy`, by default the site's rule for
    providers; `resolver` replaces DNS in tests): agents/endpoints.py, agentsite/outbound.py.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        provider_name: str,
        timeout: float = 60.0,
        max_retries: int = 2,
        policy: OutboundPolicy | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.provider_name = provider_name
        self.base_url = base_url
        # A stored key no configured secrets key opens (agentsite/encryption.py) is never sent anywhere.
        self._key_error = (
            unreadable_message(f"the API key of provider '{provider_name}'")
            if is_unreadable(api_key)
            else None
        )
        sdk = _sdk()
        # Local servers (Ollama, vLLM) need no key, but the SDK insists on one; never let it
        # fall back to the server's own OPENAI_API_KEY for a provider configured without one.
        self._client = sdk.AsyncOpenAI(
            base_url=base_url,
            api_key=(api_key if not self._key_error else None) or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
            http_client=guarded_http_client(sdk, policy or provider_policy(), resolver),
        )
        self._stream_request: Any = None  # agentsite/internals.py SdkStreamRequest, made on first use

    async def aclose(self) -> None:
        await self._client.close()

    @contextlib.asynccontextmanager
    async def _open_stream(self, payload: dict[str, Any]) -> AsyncIterator[Any]:
        """The streamed response (httpx) of a chat-completions request, as the SDK sends it and with its
        retries and errors, without its per-request machinery (agentsite/internals.py, trick 6)."""
        if self._stream_request is None:
            from agentsite.internals import SdkStreamRequest  # with the SDK: on the first model call

            usable = SdkStreamRequest.usable(self._client)
            self._stream_request = SdkStreamRequest(self._client, "/chat/completions") if usable else False
        if self._stream_request is False:  # credentials the SDK refreshes per request: its own path
            extra_body = {k: v for k, v in payload.items() if k not in ("model", "stream", "stream_options")}
            async with self._client.chat.completions.with_streaming_response.create(
                model=payload["model"],
                messages=[],
                stream=True,
                stream_options={"include_usage": True},
                extra_body=extra_body,
            ) as wrapped:
                yield wrapped.http_response
            return
        response = await self._stream_request.send(_dumps(payload))
        try:
            yield response
        finally:
            await response.aclose()

    def _check_key(self) -> None:
        if self._key_error is not None:
            raise ModelError("secret_unreadable", self._key_error)

    async def list_models(self) -> list[str]:
        self._check_key()
        sdk = _sdk()
        who = self.provider_name
        try:
            async with self._client.models.with_streaming_response.list() as response:
                ids = model_ids(await capped_body(response))
        except sdk.APIStatusError as exc:
            raise ModelError(*model_list_failure(who, status=exc.status_code, reached=True)) from None
        except (sdk.APIError, *_transport_errors()[0], *_transport_errors()[1]) as exc:
            refused = refusal_of(exc)
            if refused is not None:
                raise ModelError("address_refused", str(refused)) from None
            raise ModelError(*model_list_failure(who, reached=False)) from None
        if ids is None:
            raise ModelError(*model_list_failure(who, status=response.status_code, reached=True))
        return ids

    async def stream_chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        generation: dict[str, Any] | None = None,
    ) -> AsyncIterator[ModelChunk]:
        # The body is JSON made here, once (orjson): the SDK's typed transform of the same plain dicts
        # costs ~1 ms per request, more with long histories, and changes nothing for JSON-ready data.
        payload = {k: v for k, v in (generation or {}).items() if k not in _RESERVED_KEYS}
        payload.update(model=model, messages=messages, stream=True, stream_options={"include_usage": True})
        if tools:
            payload["tools"] = tools
        self._check_key()
        assembler = _StreamAssembler(self.provider_name, model)
        try:
            async with self._open_stream(payload) as response:
                lines = _SseLines()
                body = response.aiter_bytes()
                async for data in body:
                    for line in lines.feed(data):
                        for chunk in assembler.feed_line(line):
                            yield chunk
                    if assembler.finished:
                        # Read the end of the body (after `[DONE]` it ends at once) so that the connection
                        # goes back to the pool: one closed early is dropped, and the next reply pays a
                        # new connection.
                        await _drain(body)
                        await body.aclose()  # type: ignore[attr-defined]  # an async generator
                        break
                else:
                    for line in lines.close():
                        for chunk in assembler.feed_line(line):
                            yield chunk
                for chunk in assembler.flush():
                    yield chunk
        except ModelError:
            raise
        except _sdk().APIError as exc:
            raise self._error(exc, model=model) from None
        except _transport_errors()[0]:
            raise ModelError(
                "timeout",
                f"Provider '{self.provider_name}' stopped answering midway for model '{model}' "
                "(read timed out).",
            ) from None
        except _transport_errors()[1] as exc:
            raise ModelError(
                "stream_broken",
                f"The connection to provider '{self.provider_name}' broke while model '{model}' "
                f"was answering ({_short(str(exc)) or type(exc).__name__}).",
            ) from None
        yield assembler.finish()

    def _error(self, exc: openai.APIError, *, model: str | None) -> ModelError:
        return error_from_sdk(exc, provider=self.provider_name, model=model, base_url=self.base_url)


def error_from_sdk(
    exc: openai.APIError, *, provider: str, model: str | None, base_url: str = ""
) -> ModelError:
    """Turn an SDK exception into a ModelError with a sentence a user can act on."""
    openai = _sdk()
    who = f"Provider '{provider}'"
    what = f"model '{model}'" if model else "the model list"
    if isinstance(exc, openai.APITimeoutError):
        return ModelError("timeout", f"{who} did not answer in time for {what} (request timed out).")
    refused = refusal_of(exc)
    if refused is not None:
        return ModelError("address_refused", f"{who} was not called: {refused}")
    if isinstance(exc, openai.APIConnectionError):
        cause = _short(str(exc.__cause__ or exc))
        where = f" at {base_url}" if base_url else ""
        return ModelError(
            "connection_failed", f"Could not connect to provider '{provider}'{where} for {what}: {cause}."
        )
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, who=who, what=what, model=model)
    return ModelError("provider_error", f"{who} failed for {what}: {_short(exc.message)}")


def _status_error(exc: openai.APIStatusError, *, who: str, what: str, model: str | None) -> ModelError:
    status = exc.status_code
    detail = _server_detail(exc)
    said = f" The server said: {detail}" if detail else ""
    if status == 401:
        code, text = "auth_failed", f"{who} rejected the API key (HTTP 401) for {what}. Check the key."
    elif status == 403:
        code, text = "auth_failed", f"{who} refused access (HTTP 403) to {what}."
    elif status == 404:
        if model:
            text = f"Model '{model}' was not found at {who.lower()} (HTTP 404). Check the model name."
        else:
            text = f"{who} has no model list at this address (HTTP 404). Check the base URL."
        code = "model_not_found"
    elif status in (400, 422):
        code, text = "bad_request", f"{who} rejected the request for {what} (HTTP {status})."
    elif status == 429:
        code, text = (
            "rate_limited",
            f"{who} is rate limiting requests for {what} (HTTP 429). Try again later.",
        )
    elif status >= 500:
        code, text = "provider_error", f"{who} had a server error (HTTP {status}) while serving {what}."
    else:
        code, text = "provider_error", f"{who} refused the request for {what} (HTTP {status})."
    return ModelError(code, text + said, status=status)


def _server_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if isinstance(message, str):
            return _short(message)
    if isinstance(body, str):
        return _short(body)
    return ""


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


def _dumps(payload: dict[str, Any]) -> bytes:
    """A request body: orjson, or the standard library for what orjson refuses (an int beyond 64 bits)."""
    try:
        return orjson.dumps(payload)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(payload, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    """A stream item's JSON: orjson (~4× faster than json for a chunk), the standard library for what orjson
    refuses but json takes (NaN, integers beyond 64 bits)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class _SseLines:
    """Splits a byte stream into SSE lines (without their end: LF, CRLF or CR, as the SSE format allows),
    in C: one `split` per network read instead of Python per line."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[bytes]:
        if self._tail:
            data = self._tail + data
        if b"\r" in data:
            if data.endswith(b"\r"):  # its LF may come with the next read
                self._tail = data
                return []
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        self._tail = lines.pop()
        return lines

    def close(self) -> list[bytes]:
        """The last line, when the body ended without a line end."""
        tail, self._tail = self._tail, b""
        if not tail:
            return []
        return tail.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


DRAIN_SECONDS = 1.0  # how long the end of a finished stream may take before its connection is dropped
DRAIN_BYTES = 64 * 1024


async def _drain(body: AsyncIterator[bytes]) -> None:
    """Read what is left of a body whose stream is done, within bounds (a server that goes on sending
    after `[DONE]` loses its connection instead of holding the turn)."""
    read = 0
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for data in body:
                read += len(data)
                if read > DRAIN_BYTES:
                    return
    except TimeoutError:
        return


class _StreamAssembler:
    """Reads SSE lines of a chat-completions stream into ModelChunks, assembling tool calls.

    Tool-call fragments arrive keyed by ``index``; some servers omit the index or reuse
    index 0 with a new id for the next call, so a new id also starts a new call.
    """

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.finished = False
        self._data: list[bytes] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument fragments]]
        self._order: list[int] = []
        self._finish_reason: str | None = None
        self._usage: dict[str, int] | None = None

    def feed_line(self, line: bytes) -> list[ModelChunk]:
        if line.startswith(b"data:"):
            self._data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            return []
        if not line and self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            self._data = []
            return self._event(data)
        # Comments (": keep-alive"), "event:"/"id:"/"retry:" fields and stray blank lines.
        return []

    def flush(self) -> list[ModelChunk]:
        """An event whose closing blank line never came (the body just ended) still counts."""
        if not self._data or self.finished:
            return []
        data = b"\n".join(self._data)
        self._data = []
        return self._event(data)

    def _event(self, data: bytes) -> list[ModelChunk]:
        if data.strip() == b"[DONE]":
            self.finished = True
            return []
        try:
            payload = _loads(data)
        except ValueError:
            shown = _short(data.decode("utf-8", "replace"))[:80]
            raise ModelError(
                "invalid_response",
                f"Provider '{self.provider}' sent something that is not JSON in the stream for "
                f"model '{self.model}': {shown!r}.",
            ) from None
        if not isinstance(payload, dict):
            raise ModelError(
                "invalid_response",
                f"Provider '{self.provider}' sent an unexpected stream item for model '{self.model}'.",
            )
        if payload.get("error"):
            error = payload["error"]
            detail = error.get("message") if isinstance(error, dict) else error
            raise ModelError(
                "provider_error",
                f"Provider '{self.provider}' reported an error midway for model '{self.model}': "
                f"{_short(str(detail))}",
            )
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self._usage = {k: v for k, v in usage.items() if isinstance(v, int)}
        out: list[ModelChunk] = []
        for choice in payload.get("choices") or ():
            self._choice(choice, out)
        return out

    def _choice(self, choice: dict[str, Any], out: list[ModelChunk]) -> None:
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            out.append(ModelChunk(reasoning=reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(ModelChunk(content=content))
        for fragment in delta.get("tool_calls") or ():
            self._tool_fragment(fragment)
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        call_id = fragment.get("id")
        index = fragment.get("index")
        if not isinstance(index, int):
            index = self._order[-1] if self._order and not call_id else len(self._order)
        current = self._calls.get(index)
        if current is not None and call_id and current[0] and call_id != current[0]:
            index = max(self._calls) + 1
            current = None
        if current is None:
            current = self._calls[index] = ["", "", []]
            self._order.append(index)
        function = fragment.get("function") or {}
        if call_id:
            current[0] = call_id
        if function.get("name"):
            current[1] += function["name"]
        if isinstance(function.get("arguments"), str):
            current[2].append(function["arguments"])
        elif isinstance(function.get("arguments"), dict):
            current[2].append(json.dumps(function["arguments"]))

    def finish(self) -> ModelChunk:
        """The closing chunk; a stream that ended before it said it was done is broken."""
        if not self.finished and self._finish_reason is None:
            raise ModelError(
                "stream_broken",
                f"The stream from provider '{self.provider}' ended before model '{self.model}' "
                "finished its answer.",
            )
        calls = [
            ToolCall(id=c[0] or f"call_{n}", name=c[1], arguments="".join(c[2]))
            for n, c in enumerate(self._calls[i] for i in self._order)
        ]
        finish_reason = self._finish_reason or ("tool_calls" if calls else "stop")
        return ModelChunk(done=True, tool_calls=calls, finish_reason=finish_reason, usage=self._usage)
