"""Model clients: the protocol the turn loop talks to, and its OpenAI-compatible implementation.

The turn loop only needs a stream of small chunks (text, reasoning, and at the end the
assembled tool calls, finish reason and usage), so that is the whole interface. Providers
(OpenAI, Ollama, vLLM, LM Studio, OpenRouter, ...) all speak the chat-completions API.

Why the raw stream: the ``openai`` SDK builds a pydantic object per streamed chunk (~110 µs
of CPU each on this machine); reading the same SSE lines through
``with_streaming_response`` and ``json.loads`` costs ~35 µs, and splitting the body's bytes into
lines ourselves with orjson for each item less again (agents/model_stream.py; bench/README.md, issue 18).
We keep the SDK for what it is good at (the request's URL, headers and auth, retries of the initial
request, timeouts, typed HTTP errors), build its request once per provider (agentsite/internals.py, trick
6) and parse the lines ourselves. Every failure becomes a :class:`ModelError` whose message names the
provider and the model, because it is shown to the user as is.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator
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
from agents.model_stream import (
    ModelChunk,
    ModelError,
    SseLines,
    StreamAssembler,
    ToolCall,
    drain_body,
    short_detail,
)
from agentsite.stack import STOCK_STACK
from security.encryption import is_unreadable, unreadable_message
from security.outbound import OutboundPolicy, Resolver

if TYPE_CHECKING:
    import openai

__all__ = ["ModelChunk", "ModelClient", "ModelError", "OpenAIModelClient", "ToolCall", "error_from_sdk"]


def _sdk() -> Any:
    """The openai SDK, imported on first use: it costs ~38 MB and is not needed until a real provider
    is called (the demo model, cron, ACP and most requests never touch it)."""
    import openai

    return openai


logger = logging.getLogger(__name__)

# Keys of a request body that the turn decides; generation options may not override them.
_RESERVED_KEYS = frozenset({"model", "messages", "tools", "stream", "stream_options", "n"})


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
    providers; `resolver` replaces DNS in tests): agents/endpoints.py, security/outbound.py.
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
        # A stored key no configured secrets key opens (security/encryption.py) is never sent anywhere.
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
        # agentsite/internals.py SdkStreamRequest, made on first use; False: the SDK's own path (on the stock
        # stack, agentsite/stack.py, always)
        self._stream_request: Any = False if STOCK_STACK else None

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
        if self._stream_request is False:  # credentials the SDK refreshes per request, or the stock stack
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
        assembler = StreamAssembler(self.provider_name, model)
        try:
            async with self._open_stream(payload) as response:
                lines = SseLines()
                body = response.aiter_bytes()
                async for data in body:
                    for line in lines.feed(data):
                        for chunk in assembler.feed_line(line):
                            yield chunk
                    if assembler.finished:
                        # Read the end of the body (after `[DONE]` it ends at once) so that the connection
                        # goes back to the pool: one closed early is dropped, and the next reply pays a
                        # new connection.
                        await drain_body(body)
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
                f"was answering ({short_detail(str(exc)) or type(exc).__name__}).",
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
        cause = short_detail(str(exc.__cause__ or exc))
        where = f" at {base_url}" if base_url else ""
        return ModelError(
            "connection_failed", f"Could not connect to provider '{provider}'{where} for {what}: {cause}."
        )
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, who=who, what=what, model=model)
    return ModelError("provider_error", f"{who} failed for {what}: {short_detail(exc.message)}")


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
            return short_detail(message)
    if isinstance(body, str):
        return short_detail(body)
    return ""


def _dumps(payload: dict[str, Any]) -> bytes:
    """A request body: orjson, or the standard library for what orjson refuses (an int beyond 64 bits)."""
    try:
        return orjson.dumps(payload)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(payload, separators=(",", ":")).encode()
