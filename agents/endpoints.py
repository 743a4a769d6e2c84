"""Where provider calls may go, and what a provider's model list may tell its caller (docs/protocol.md §6.3).

- :func:`provider_policy`: the site's rule for provider URLs (security/outbound.py), checked when a
  `base_url` is saved (REST serializer, admin form, `provider_register_from_env`) and on every connection
  the model client makes (:func:`guarded_http_client`).
- :func:`model_ids` and :func:`model_list_failure`: `POST /providers/{id}/test` answers the status and the
  model ids, never any part of a body that is not a model list, and one sentence for every way of not
  reaching the provider — so the endpoint cannot tell a closed port from a filtered one or a refused TLS
  handshake on an internal host (the finding it answers: ports on 127.0.0.1 told apart by error text).
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from django.conf import settings

from security.outbound import GuardedTransport, OutboundPolicy, OutboundRefused, Resolver

MODEL_LIST_MAX_BYTES = 8 * 1024 * 1024  # OpenRouter's list with descriptions is ~1 MB
MODEL_ID_MAX_LENGTH = 200  # what Provider.model_list entries may hold


def provider_policy(*, label: str = "base_url") -> OutboundPolicy:
    """The outbound rule for provider URLs: `AGENTSITE_PROVIDER_DENY_PRIVATE` decides about private ranges.
    `label` starts its sentences: "base_url" in logs and model errors, "The URL" under a form's field."""
    return OutboundPolicy(deny_private=settings.AGENTSITE_PROVIDER_DENY_PRIVATE, label=label)


def guarded_http_client(sdk: Any, policy: OutboundPolicy, resolver: Resolver | None = None) -> Any:
    """The openai SDK's own default HTTP client (its timeouts and limits), on a transport that connects
    only where `policy` allows (security/outbound.py GuardedTransport says why a transport).

    Built from the HTTP library the installed SDK uses (httpx for openai 1.x, httpx2 later).
    """
    default_client = sdk.DefaultAsyncHttpxClient
    base = next(cls for cls in default_client.__mro__ if cls.__name__ == "AsyncClient")
    library = importlib.import_module(base.__module__.split(".", 1)[0])
    transport = GuardedTransport(library.AsyncHTTPTransport(), policy, resolver=resolver)
    return default_client(transport=transport, trust_env=False)


def refusal_of(exc: BaseException) -> OutboundRefused | None:
    """The OutboundRefused behind an SDK connection error, if that is what stopped the request."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OutboundRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


async def capped_body(response: Any) -> bytes | None:
    """A streamed response's body, or None past MODEL_LIST_MAX_BYTES (then it is no model list we take)."""
    body = bytearray()
    async for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MODEL_LIST_MAX_BYTES:
            return None
    return bytes(body)


def model_ids(body: bytes | None) -> list[str] | None:
    """The ids of an OpenAI-compatible model list (`{"data": [{"id": ...}, ...]}`), sorted; None when the
    body is anything else."""
    if body is None:
        return None
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    ids = [item.get("id") for item in data if isinstance(item, dict)]
    if len(ids) != len(data) or not all(_is_model_id(i) for i in ids):
        return None
    return sorted(str(i) for i in ids)


def _is_model_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MODEL_ID_MAX_LENGTH


def model_list_failure(provider: str, *, status: int | None = None, reached: bool) -> tuple[str, str]:
    """(code, sentence) for a model list that could not be had. Nothing of the response goes in."""
    if not reached:
        return "unreachable", f"Could not reach provider '{provider}' at its base URL for the model list."
    if status in (401, 403):
        return (
            "auth_failed",
            f"Provider '{provider}' answered, but refused the API key (HTTP {status}) for the model list.",
        )
    shown = f" (HTTP {status})" if status is not None else ""
    return (
        "not_a_model_list",
        f"Provider '{provider}' answered, but not with an OpenAI-compatible model list{shown}.",
    )
